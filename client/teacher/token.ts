/**
 * The teacher token arrives in the link the server printed (/teacher?room=…&token=…). The page
 * is meant for the projector, so the token leaves the address bar as soon as it is read (the
 * class sees the URL, and so would a screenshot or a shared screen); the tab keeps it in
 * sessionStorage, which only this tab reads and which goes with the tab, so a reload still
 * works. The server sends Referrer-Policy: no-referrer as well, so no request carries the
 * page's address anywhere.
 */
const TOKEN_KEY = 'webring:teacher:token';

/** The token from the address (then removed from it), or the one this tab kept; '' when neither has one. */
export function takeTeacherToken(): string {
  const url = new URL(location.href);
  const fromUrl = url.searchParams.get('token');
  if (fromUrl === null) return sessionStorage.getItem(TOKEN_KEY) ?? '';
  url.searchParams.delete('token');
  history.replaceState(history.state, '', `${url.pathname}${url.search}${url.hash}`);
  try {
    sessionStorage.setItem(TOKEN_KEY, fromUrl);
  } catch (err) {
    // Storage refused (a private window with no quota): the page works, but a reload needs the printed link again.
    console.warn(`the teacher token is kept for this page only, not for a reload: ${String(err)}`);
  }
  return fromUrl;
}
