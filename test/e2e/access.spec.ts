/**
 * Access from a student's and a teacher's seat: the teacher's card shows the
 * room's join code and a class link that carries it; a student with a wrong code is told in
 * plain words and let in with the right one.
 */
import { test, expect } from '@playwright/test';
import { E2E_TOKEN } from '../../playwright.config';
import { codeFor, status } from './helpers';

const ROOM = 'e2e-access';

test('the teacher shows the join code; a wrong code is explained in plain words, the right one joins', async ({ browser }) => {
  const code = codeFor(ROOM);
  const teacherContext = await browser.newContext();
  const teacher = await teacherContext.newPage();
  await teacher.goto(`/teacher?room=${ROOM}&token=${E2E_TOKEN}`);
  await expect(teacher.getByTestId('join-code')).toHaveText(code);
  const link = await teacher.locator('.student-url').getAttribute('href');
  expect(new URL(link!).searchParams.get('code')).toBe(code);
  expect(new URL(link!).searchParams.get('room')).toBe(ROOM);

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
