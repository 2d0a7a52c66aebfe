/** The part of pngjs (no bundled types) the --data folder reader, its tests and the leak report (lab/leak/) use. */
declare module 'pngjs' {
  export interface DecodedPng {
    width: number;
    height: number;
    /** RGBA, 4 bytes a pixel, row-major. */
    data: Buffer;
  }
  export const PNG: {
    new (options: { width: number; height: number }): DecodedPng;
    sync: {
      read(buffer: Buffer): DecodedPng;
      /** colorType 0: grayscale from the red channel; default 6, RGBA. */
      write(png: DecodedPng, options?: { colorType?: 0 | 2 | 4 | 6 }): Buffer;
    };
  };
}
