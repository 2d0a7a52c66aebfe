/**
 * What `npm test` does on a machine that lacks root or a Debian package
 * (test/support/requirements.ts): a normal user's run skips what needs it, in one line
 * naming it and the command that runs it; CI's run (WEBRING_REQUIRE_ALL=1) fails instead.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { programNeed, rootNeed, skipUnless } from '../support/requirements';

test('a missing program skips in one line naming it, its package and the install command; CI (WEBRING_REQUIRE_ALL=1) fails instead', () => {
  const missing = programNeed('/nonexistent/webring-test-binary', 'webring-test-pkg');
  const present = programNeed(process.execPath, 'nodejs');
  assert.equal(skipUnless([present], {}), false, 'nothing missing: the test runs');
  const reason = skipUnless([present, missing], {});
  assert.equal(typeof reason, 'string');
  assert.ok(!String(reason).includes('\n'), 'one line');
  assert.match(String(reason), /\/nonexistent\/webring-test-binary \(Debian's webring-test-pkg\).*sudo apt-get install -y webring-test-pkg/);
  assert.doesNotMatch(String(reason), /nodejs/, 'only what is missing is named');
  assert.throws(() => skipUnless([missing], { WEBRING_REQUIRE_ALL: '1' }), /WEBRING_REQUIRE_ALL=1 and this test needs \/nonexistent\/webring-test-binary/);
  assert.equal(skipUnless([present], { WEBRING_REQUIRE_ALL: '1' }), false);
});

test("root is a need like a package: met as uid 0, else the lab's one line says how to run it", () => {
  const need = rootNeed();
  assert.equal(need.met, process.getuid!() === 0);
  assert.match(need.fix, /sudo npm run test:lab/);
});
