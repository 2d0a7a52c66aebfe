// simple-peer's self-contained bundle needs no Node polyfills under vite (its main entry
// does: `global`, `Buffer`, `process`). It exports the same class as the typed package.
declare module 'simple-peer/simplepeer.min.js' {
  import SimplePeer from 'simple-peer';
  export default SimplePeer;
}
