/** vite's `?raw` imports: a file's text, bundled (the names task's pages bundle the name lists). */
declare module '*?raw' {
  const text: string;
  export default text;
}
