/**
 * The teacher's seat settings survive a restart (issue 57, defect 5): room.json keeps the
 * vouch that members sharing an address are distinct devices, and the seat cap, and a
 * restarted server reads them back. Before, the file's schema knew neither, so a room with
 * a seat cap was read back as invalid and dropped.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ManualClock } from '../../shared/util/clock';
import { Room } from '../../signaling-server/rooms/room';
import { encodeRoom, toRoomFile } from '../../signaling-server/rooms/room-codec';
import { RoomPersistence } from '../../signaling-server/rooms/room-persistence';
import { createLogger } from '../../signaling-server/logger';

test('issue 57 (5): the vouch for shared addresses and the seat cap come back after a restart (failed on the previous main)', async () => {
  const clock = new ManualClock();
  const room = new Room('nat-class', clock);
  room.setSeatsPerAddress(32);
  room.vouchForSharedAddresses(true);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'webring-vouch-'));
  const persistence = new RoomPersistence(dir, createLogger('silent'), clock);
  await persistence.save(toRoomFile(encodeRoom(room)));
  await persistence.flush();
  const [restored] = await new RoomPersistence(dir, createLogger('silent'), clock).loadAll();
  assert.deepEqual(restored?.status().seats, { perAddress: 32, defaultPerLanAddress: 4, vouched: true });
  assert.equal(restored?.isDisposable, false, 'a room with a setting stays while empty');

  room.vouchForSharedAddresses(false);
  room.setSeatsPerAddress(null);
  assert.equal('sharedAddressVouched' in toRoomFile(encodeRoom(room)), false, 'not vouched: nothing written');
  assert.equal(room.isDisposable, true);
});
