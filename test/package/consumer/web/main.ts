// A page that joins a room from the browser: the package's browser entry, bundled by vite.
import { joinRoom, WebringError } from 'webring';

try {
  const member = await joinRoom({ url: location.origin, room: 'class', code: new URLSearchParams(location.search).get('code') ?? '' });
  member.on('membership', (m) => console.log(`rank ${m.rank} of ${m.size}${m.isChief ? ' (chief)' : ''}`));
} catch (e) {
  if (e instanceof WebringError) console.log(e.code);
}
