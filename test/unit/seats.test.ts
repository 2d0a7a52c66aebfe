/**
 * Where a client address is, and which addresses count as one client
 * (signaling-server/rooms/seats.ts). Issue 38: global IPv6 addresses counted as public and
 * one by one, so a student on the laptop's IPv6 prefix had no seat cap, and a device with
 * many privacy addresses counted as many clients. The server-side effect is tested for
 * real in test/server/seats-lockout.test.ts; here the rules, with this machine's addresses
 * passed in.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { addressGroup, addressScope, ipv6Prefix64 } from '../../signaling-server/rooms/seats';

test('the /64 of an IPv6 address, however it is written; none for IPv4', () => {
  assert.equal(ipv6Prefix64('2001:db8::1'), '2001:db8:0:0');
  assert.equal(ipv6Prefix64('2001:0db8:0001:0002:3:4:5:6'), '2001:db8:1:2');
  assert.equal(ipv6Prefix64('2001:db8:1:2::'), '2001:db8:1:2');
  assert.equal(ipv6Prefix64('::1'), '0:0:0:0');
  assert.equal(ipv6Prefix64('192.168.1.2'), null);
  assert.equal(ipv6Prefix64('not an address'), null);
});

test('issue 38 (10): a global IPv6 address in the laptop\'s own /64 is the class network; elsewhere it is public (failed on the previous main)', () => {
  const laptop = ['127.0.0.1', '192.168.1.10', '2001:db8:1:2::10'];
  assert.equal(addressScope('2001:db8:1:2::99', laptop), 'lan');
  assert.equal(addressScope('2001:db8:1:3::99', laptop), 'public');
  assert.equal(addressScope('2001:db8:1:2::10', laptop), 'loopback', 'the laptop itself');
  assert.equal(addressScope('fd00::5', laptop), 'lan');
});

test('issue 38 (10): public IPv6 addresses count by their /64 (a household, or one device\'s privacy addresses); on the class network each counts alone (failed on the previous main)', () => {
  const laptop = ['2001:db8:1:2::10'];
  assert.equal(addressGroup('2001:db8:7:7::1', laptop), addressGroup('2001:db8:7:7:abcd::2', laptop));
  assert.notEqual(addressGroup('2001:db8:7:7::1', laptop), addressGroup('2001:db8:7:8::1', laptop));
  assert.notEqual(addressGroup('2001:db8:1:2::1', laptop), addressGroup('2001:db8:1:2::2', laptop), 'classmates on the laptop\'s prefix');
  assert.equal(addressGroup('::ffff:192.168.1.20', laptop), '192.168.1.20');
});
