/** The part of pngjs (no bundled types) the --data folder reader and its tests use. */
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
      write(png: DecodedPng): Buffer;
    };
  };
}
