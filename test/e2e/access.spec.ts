/**
 * Access from a student's and a teacher's seat: the teacher's card shows the
 * room's join code and a class link that carries it, and sets the seats one device address
 * may hold; a student with a wrong code is told in plain words and let in with the right one.
 */
import { test, expect } from '@playwright/test';
import { E2E_TOKEN } from '../../playwright.config';
import type { RoomStatus } from '../../shared/protocol';
import { asTeacher, codeFor, status } from './helpers';

const ROOM = 'e2e-access';

test('the teacher shows the join code and sets the seats per address; a wrong code is explained in plain words, the right one joins', async ({ browser, request }) => {
  const code = codeFor(ROOM);
  const teacherContext = await browser.newContext();
  const teacher = await teacherContext.newPage();
  await teacher.goto(`/teacher?room=${ROOM}&token=${E2E_TOKEN}`);
  await expect(teacher.getByTestId('join-code')).toHaveText(code);
  const link = await teacher.locator('.student-url').getAttribute('href');
  expect(new URL(link!).searchParams.get('code')).toBe(code);
  expect(new URL(link!).searchParams.get('room')).toBe(ROOM);

  // A lab behind NAT: the teacher raises the seats one address may hold, and the room API reports it.
  const seats = teacher.getByLabel('Seats per device address on the class network');
  await expect(seats.locator('option').first()).toHaveText('default (4)');
  await expect(seats).toHaveValue('');
  const seatsNow = async () => ((await (await request.get(`/api/rooms/${ROOM}`, asTeacher)).json()) as RoomStatus).seats;
  await seats.selectOption('12');
  await expect.poll(seatsNow).toEqual({ perAddress: 12, defaultPerLanAddress: 4, vouched: false });
  // A reload shows the room's setting, read from its status.
  await teacher.reload();
  await expect(seats).toHaveValue('12');
  await seats.selectOption('');
  await expect.poll(seatsNow).toEqual({ perAddress: null, defaultPerLanAddress: 4, vouched: false });
  await expect(seats).toHaveValue('');

  // Without the teacher token the card says why there is no code, and shows none.
  const stranger = await teacherContext.newPage();
  await stranger.goto(`/teacher?room=${ROOM}`);
  await expect(stranger.locator('#join-body [role=alert]')).toContainText('ERR_UNAUTHORIZED');
  await expect(stranger.getByTestId('join-code')).toHaveCount(0);

  // A student who typed the address: the room is filled in, the code is not.
  const studentContext = await browser.newContext();
  const page = await studentContext.newPage();
  await page.goto(`/?room=${ROOM}&name=guesser&backend=cpu`);
  await page.getByLabel('Join code').fill('AAA-AAA');
  await page.getByRole('button', { name: 'Join' }).click();
  const error = page.getByRole('alert');
  await expect(error).toContainText(`That join code does not open room “${ROOM}”`);
  await expect(error).toContainText('ERR_BAD_JOIN_CODE');
  await expect(status(page)).toHaveAttribute('data-rank', '');
  // Not a join code at all: the page says what one looks like, without asking the server.
  await page.getByLabel('Join code').fill('hello');
  await page.getByRole('button', { name: 'Join' }).click();
  await expect(error).toContainText('6 letters and digits');

  // Typed in lower case, without its dash: the right code joins.
  await page.getByLabel('Join code').fill(code.toLowerCase().replace('-', ''));
  await page.getByRole('button', { name: 'Join' }).click();
  await expect(status(page)).toHaveAttribute('data-rank', '0', { timeout: 60_000 });
  await expect(error).toBeHidden();
  await expect(teacher.getByTestId('members').locator('tr')).toHaveCount(1);
  await teacherContext.close();
  await studentContext.close();
});

test('the projected teacher page never shows the token: not in the address bar, not on the page; a second device gets it only from a QR code shown on purpose', async ({ browser }) => {
  const context = await browser.newContext();
  const teacher = await context.newPage();
  await teacher.goto(`/teacher?room=${ROOM}&token=${E2E_TOKEN}`);
  await expect(teacher.getByTestId('join-code')).toHaveText(codeFor(ROOM));
  expect(teacher.url()).not.toContain(E2E_TOKEN);
  expect(await teacher.content()).not.toContain(E2E_TOKEN);
  // The panel tells the teacher how to use the page from a phone, and shows the code only when asked.
  const panel = teacher.getByTestId('second-device');
  await panel.locator('summary').click();
  await expect(panel).toContainText('teacher-link.txt');
  await expect(teacher.getByTestId('teacher-qr')).toBeHidden();
  await teacher.getByTestId('show-teacher-qr').click();
  await expect(teacher.getByTestId('teacher-qr').locator('svg')).toBeVisible();
  expect(await teacher.content(), 'a QR code, not the token in text').not.toContain(E2E_TOKEN);
  await teacher.getByTestId('show-teacher-qr').click();
  await expect(teacher.getByTestId('teacher-qr')).toBeHidden();
  // A reload keeps the page working without the token in its address.
  await teacher.reload();
  await expect(teacher.getByTestId('join-code')).toHaveText(codeFor(ROOM));
  await context.close();
});

test('more than 32 students: the teacher opens a second room with one click; both rooms show, each with its own code, QR code and head count', async ({ browser }) => {
  const context = await browser.newContext();
  const teacher = await context.newPage();
  await teacher.goto(`/teacher?room=${ROOM}&token=${E2E_TOKEN}`);
  await expect(teacher.getByTestId('join-code')).toHaveText(codeFor(ROOM));
  await teacher.getByTestId('open-room').click();
  const second = `${ROOM}-2`;
  const card = teacher.locator(`.other-room[data-room="${second}"]`);
  await expect(card.getByTestId('join-code')).toHaveText(codeFor(second));
  await expect(card.locator('svg')).toBeVisible();
  await expect(card.getByTestId('other-room-status')).toHaveText('no students yet');
  // A student of the second room joins with its link; the first room's page counts them.
  const href = await card.locator('.student-url').getAttribute('href');
  expect(new URL(href!).searchParams.get('room')).toBe(second);
  const studentContext = await browser.newContext();
  const student = await studentContext.newPage();
  await student.goto(`${new URL(href!).pathname}${new URL(href!).search}&name=late&backend=cpu`);
  await student.getByRole('button', { name: 'Join' }).click();
  await expect(status(student)).toHaveAttribute('data-rank', /^\d+$/, { timeout: 60_000 });
  await expect(card.getByTestId('other-room-status')).toContainText('1 of 32 students', { timeout: 15_000 });
  // Its link switches the page to the second room, which lists the first.
  await card.getByRole('link', { name: `Room ${second}` }).click();
  await expect(teacher.locator('#join-body').getByTestId('join-code')).toHaveText(codeFor(second));
  await expect(teacher.locator(`.other-room[data-room="${ROOM}"]`).getByTestId('join-code')).toHaveText(codeFor(ROOM));
  await studentContext.close();
  await context.close();
});
