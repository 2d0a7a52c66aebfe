/**
 * The strokes drawn on the digit pad and how they are painted: one round-capped line,
 * scaled to any canvas side, on the visible pad and on the fixed-size ink buffer the
 * model's input is made from; and the 28 × 28 preview of that input.
 */
import { MNIST_SIZE_PX } from '../digit-preprocess';

/**
 * Strokes are rendered for preprocessing at this fixed size, whatever the screen, so a
 * phone and a projector give the model the same input. 10 × MNIST's frame.
 */
export const INK_BUFFER_PX = 280;
/**
 * Line width as a fraction of the pad's side. A digit drawn across about two thirds of the
 * pad is scaled by roughly 20 / 190 px, which turns this 25 px line into the 2–3 px stroke
 * of real MNIST digits.
 */
export const LINE_WIDTH_FRACTION = 1 / 11;
const INK_COLOUR = '#000';

export interface Point {
  /** 0..1 across the pad. */
  x: number;
  y: number;
}

const lineWidth = (side: number) => side * LINE_WIDTH_FRACTION;

export function paintDot(ctx: CanvasRenderingContext2D, side: number, p: Point): void {
  ctx.fillStyle = INK_COLOUR;
  ctx.beginPath();
  ctx.arc(p.x * side, p.y * side, lineWidth(side) / 2, 0, 2 * Math.PI);
  ctx.fill();
}

export function paintSegment(ctx: CanvasRenderingContext2D, side: number, a: Point, b: Point): void {
  ctx.strokeStyle = INK_COLOUR;
  ctx.lineWidth = lineWidth(side);
  ctx.lineCap = 'round';
  ctx.lineJoin = 'round';
  ctx.beginPath();
  ctx.moveTo(a.x * side, a.y * side);
  ctx.lineTo(b.x * side, b.y * side);
  ctx.stroke();
}

/** Clears the canvas and paints every stroke again, e.g. at a new size. */
export function paintStrokes(ctx: CanvasRenderingContext2D, side: number, strokes: readonly Point[][]): void {
  ctx.clearRect(0, 0, side, side);
  for (const stroke of strokes) {
    paintDot(ctx, side, stroke[0]!);
    for (let i = 1; i < stroke.length; i++) paintSegment(ctx, side, stroke[i - 1]!, stroke[i]!);
  }
}

/** Dark ink on white, one canvas pixel per MNIST pixel; CSS enlarges it without smoothing. */
export function drawPreview(ctx: CanvasRenderingContext2D, input: Float32Array | null): void {
  const image = ctx.createImageData(MNIST_SIZE_PX, MNIST_SIZE_PX);
  for (let i = 0; i < MNIST_SIZE_PX * MNIST_SIZE_PX; i++) {
    const shade = Math.round(255 * (1 - (input?.[i] ?? 0)));
    image.data.set([shade, shade, shade, 255], i * 4);
  }
  ctx.putImageData(image, 0, 0);
}
