/**
 * "Try the model": a square pad to draw a digit on with a mouse, finger or pen, and the
 * model's answer as ten labelled probability bars. The pad never touches TensorFlow.js:
 * it hands the caller a preprocessed 28 × 28 input (../digit-preprocess.ts) and shows
 * whatever probabilities come back, so it leaks no tensors and works with any model.
 * This file owns the pad's page and its drawing and asking; the answer is digit-answer.ts's,
 * the painting of strokes digit-ink.ts's.
 */
import './digit-pad.css';
import { MNIST_SIZE_PX, inkFromRgba, preprocessDigit } from '../digit-preprocess';
import { DIGIT_CLASSES } from '../format';
import { sameClasses } from '../../../protocol';
import { el } from '../../element';
import { AnswerView, toProbabilities } from './digit-answer';
import { INK_BUFFER_PX, drawPreview, paintDot, paintSegment, paintStrokes, type Point } from './digit-ink';

export interface DigitPadOptions {
  /**
   * Classifies a 784-value MNIST input (row-major 28 × 28, 0..1, ink = 1). Returns the ten
   * class probabilities, or null when no model is ready. Logits are accepted too: anything
   * that is not already a probability distribution goes through a softmax here.
   */
  predict: (input: Float32Array) => Promise<Float32Array | null>;
  /** Heading above the pad. */
  title?: string;
  /** Shown, and announced, while nothing is drawn. */
  emptyHint?: string;
  /** The model's classes in output order: one bar each (the digits 0–9 by default). */
  classes?: readonly string[];
}

export interface DigitPad {
  /** Asks for a new prediction of the current drawing, e.g. after the weights changed. */
  refresh(): void;
  /** Disabling stops drawing and prediction and shows `reason` in place of the answer. */
  setEnabled(enabled: boolean, reason?: string): void;
  /** Removes the pad and its listeners; pending predictions are ignored. */
  destroy(): void;
  /** What is drawn, preprocessed as the model sees it (784 values, 0..1, ink = 1), or null when nothing is. */
  input(): Float32Array | null;
  /** Clears the drawing, as the Clear button does. */
  clear(): void;
  /** The model's classes changed (a run on the class's own data): one bar each from now on. */
  setClasses(classes: readonly string[], emptyHint?: string): void;
}

/** After a stroke ends, wait this long for the next one before asking the model. */
export const PREDICT_DEBOUNCE_MS = 150;
const DEFAULT_TITLE = 'Draw a digit';
const DEFAULT_EMPTY_HINT = 'Draw one digit, 0 to 9, in the box.';
const DEFAULT_DISABLED_REASON = 'The model is not available right now.';
const NOT_READY_TEXT = 'No answer yet: the model is not ready.';

let padCount = 0;

/** Renders the pad inside `container` (appended; the container is otherwise left alone). */
export function mountDigitPad(container: HTMLElement, options: DigitPadOptions): DigitPad {
  const id = `digit-pad-${++padCount}`;
  let emptyHint = options.emptyHint ?? DEFAULT_EMPTY_HINT;

  const root = el('div', 'digit-pad');
  root.dataset.testid = 'digit-pad';
  root.setAttribute('role', 'group');
  root.setAttribute('aria-labelledby', `${id}-title`);
  const title = el('h3', 'digit-pad__title', options.title ?? DEFAULT_TITLE);
  title.id = `${id}-title`;

  const drawing = el('div', 'digit-pad__drawing');
  const frame = el('div', 'digit-pad__frame');
  const canvas = el('canvas', 'digit-pad__canvas');
  canvas.dataset.testid = 'digit-pad-canvas';
  canvas.setAttribute('role', 'img');
  canvas.setAttribute(
    'aria-label',
    'Drawing pad: draw one digit, 0 to 9, with a mouse, a finger or a pen. The model\'s guess appears next to it.',
  );
  // Without this the browser scrolls or zooms the page instead of delivering pointermove
  // on touch screens (Pointer Events spec, §touch-action). The stylesheet sets it too.
  canvas.style.touchAction = 'none';
  const overlay = el('p', 'digit-pad__overlay');
  overlay.hidden = true;
  frame.append(canvas, overlay);

  const controls = el('div', 'digit-pad__controls');
  const clearButton = el('button', 'secondary digit-pad__clear', 'Clear');
  clearButton.type = 'button';
  clearButton.dataset.testid = 'digit-pad-clear';
  clearButton.setAttribute('aria-label', 'Clear the drawing');
  const preview = el('figure', 'digit-pad__preview');
  const previewCanvas = el('canvas', 'digit-pad__preview-canvas');
  previewCanvas.width = MNIST_SIZE_PX;
  previewCanvas.height = MNIST_SIZE_PX;
  previewCanvas.dataset.testid = 'digit-pad-preview';
  previewCanvas.setAttribute('role', 'img');
  previewCanvas.setAttribute('aria-label', 'What the model sees: the drawing scaled and centred to 28 by 28 pixels, like MNIST.');
  preview.append(previewCanvas, el('figcaption', '', 'What the model sees (28 × 28)'));
  controls.append(clearButton, preview);
  drawing.append(frame, controls);

  const answer = new AnswerView(id, emptyHint, options.classes ?? DIGIT_CLASSES);

  const body = el('div', 'digit-pad__body');
  body.append(drawing, answer.element);
  root.append(title, body);
  container.append(root);

  const view = canvas.getContext('2d');
  const inkCanvas = document.createElement('canvas');
  inkCanvas.width = INK_BUFFER_PX;
  inkCanvas.height = INK_BUFFER_PX;
  const ink = inkCanvas.getContext('2d', { willReadFrequently: true });
  const previewCtx = previewCanvas.getContext('2d');
  if (!view || !ink || !previewCtx) throw new Error('digit pad: no 2D canvas context');

  const strokes: Point[][] = [];
  let enabled = true;
  let destroyed = false;
  let activePointer: number | null = null;
  /** Bumped whenever the drawing changes, so an answer about an older drawing is dropped. */
  let drawingVersion = 0;
  let cachedInput: { version: number; input: Float32Array | null } | null = null;
  let timer: ReturnType<typeof setTimeout> | null = null;
  let inFlight = false;
  let again = false;

  /** Preprocesses the ink buffer once per drawing; refresh() reuses it as weights change. */
  const currentInput = (): Float32Array | null => {
    if (cachedInput?.version !== drawingVersion) {
      const input = strokes.length === 0 ? null : preprocessDigit(inkFromRgba(ink.getImageData(0, 0, INK_BUFFER_PX, INK_BUFFER_PX)));
      cachedInput = { version: drawingVersion, input };
      drawPreview(previewCtx, input);
    }
    return cachedInput.input;
  };

  const predictNow = async (): Promise<void> => {
    if (destroyed || !enabled || activePointer !== null) return;
    const input = currentInput();
    if (input === null) {
      answer.showNoAnswer('empty', emptyHint);
      return;
    }
    // One question at a time: a model asked faster than it answers only queues work.
    if (inFlight) {
      again = true;
      return;
    }
    inFlight = true;
    const version = drawingVersion;
    try {
      const out = await options.predict(input.slice());
      if (destroyed || !enabled || version !== drawingVersion) return;
      if (out === null) answer.showNoAnswer('unavailable', NOT_READY_TEXT);
      else answer.showAnswer(toProbabilities(out, answer.classes.length));
    } catch (err) {
      if (destroyed || !enabled || version !== drawingVersion) return;
      answer.showNoAnswer('error', `No answer: ${err instanceof Error ? err.message : String(err)}`);
    } finally {
      inFlight = false;
      if (again && !destroyed) {
        again = false;
        void predictNow();
      }
    }
  };

  const schedulePredict = (delayMs: number) => {
    if (timer !== null) clearTimeout(timer);
    timer = setTimeout(() => {
      timer = null;
      void predictNow();
    }, delayMs);
  };

  const drawingChanged = () => {
    drawingVersion++;
    answer.markPending();
  };

  /** The visible canvas gets a devicePixelRatio backing store, redrawn from the strokes on resize. */
  const fitBackingStore = () => {
    const side = Math.max(1, Math.round(canvas.clientWidth * (window.devicePixelRatio || 1)));
    if (canvas.width === side && canvas.height === side) return;
    canvas.width = side;
    canvas.height = side;
    paintStrokes(view, side, strokes);
  };
  const resizeObserver = new ResizeObserver(fitBackingStore);
  resizeObserver.observe(canvas);
  fitBackingStore();

  const toPoint = (e: PointerEvent): Point => {
    const rect = canvas.getBoundingClientRect();
    const side = canvas.clientWidth || 1;
    return { x: (e.clientX - rect.left - canvas.clientLeft) / side, y: (e.clientY - rect.top - canvas.clientTop) / side };
  };

  const onPointerDown = (e: PointerEvent) => {
    if (!enabled || activePointer !== null) return;
    if (e.pointerType === 'mouse' && e.button !== 0) return;
    e.preventDefault();
    try {
      canvas.setPointerCapture(e.pointerId);
    } catch (err) {
      // A synthetic PointerEvent (a test's dispatchEvent) names no active pointer and
      // capture throws NotFoundError; the stroke still works, it just ends at the edge.
      if (!(err instanceof DOMException && err.name === 'NotFoundError')) throw err;
    }
    activePointer = e.pointerId;
    if (timer !== null) clearTimeout(timer);
    timer = null;
    const p = toPoint(e);
    strokes.push([p]);
    paintDot(view, canvas.width, p);
    paintDot(ink, INK_BUFFER_PX, p);
    drawingChanged();
  };

  const onPointerMove = (e: PointerEvent) => {
    if (e.pointerId !== activePointer) return;
    const stroke = strokes[strokes.length - 1];
    if (!stroke) return;
    // Coalesced events keep fast strokes smooth where the browser batches moves per frame.
    const events = typeof e.getCoalescedEvents === 'function' ? e.getCoalescedEvents() : [];
    for (const ev of events.length > 0 ? events : [e]) {
      const p = toPoint(ev);
      const last = stroke[stroke.length - 1]!;
      if (Math.abs(p.x - last.x) + Math.abs(p.y - last.y) < 0.002) continue;
      stroke.push(p);
      paintSegment(view, canvas.width, last, p);
      paintSegment(ink, INK_BUFFER_PX, last, p);
    }
    drawingChanged();
  };

  const onPointerEnd = (e: PointerEvent) => {
    if (e.pointerId !== activePointer) return;
    activePointer = null;
    if (canvas.hasPointerCapture(e.pointerId)) canvas.releasePointerCapture(e.pointerId);
    schedulePredict(PREDICT_DEBOUNCE_MS);
  };

  const clear = () => {
    strokes.length = 0;
    activePointer = null;
    if (timer !== null) clearTimeout(timer);
    timer = null;
    view.clearRect(0, 0, canvas.width, canvas.height);
    ink.clearRect(0, 0, INK_BUFFER_PX, INK_BUFFER_PX);
    drawingChanged();
    currentInput();
    if (enabled) answer.showNoAnswer('empty', emptyHint);
  };

  canvas.addEventListener('pointerdown', onPointerDown);
  canvas.addEventListener('pointermove', onPointerMove);
  canvas.addEventListener('pointerup', onPointerEnd);
  canvas.addEventListener('pointercancel', onPointerEnd);
  canvas.addEventListener('lostpointercapture', onPointerEnd);
  clearButton.addEventListener('click', clear);

  answer.showNoAnswer('empty', emptyHint);
  drawPreview(previewCtx, null);

  return {
    refresh() {
      if (timer === null) void predictNow();
    },
    setEnabled(next, reason) {
      if (destroyed) return;
      enabled = next;
      root.classList.toggle('is-disabled', !next);
      canvas.setAttribute('aria-disabled', String(!next));
      clearButton.disabled = !next;
      overlay.hidden = next;
      overlay.textContent = next ? '' : (reason ?? DEFAULT_DISABLED_REASON);
      if (!next) {
        if (activePointer !== null && canvas.hasPointerCapture(activePointer)) canvas.releasePointerCapture(activePointer);
        activePointer = null;
        if (timer !== null) clearTimeout(timer);
        timer = null;
        answer.showNoAnswer('disabled', reason ?? DEFAULT_DISABLED_REASON);
      } else {
        // Whatever was drawn before still deserves an answer.
        drawingVersion++;
        schedulePredict(0);
      }
    },
    input: () => currentInput()?.slice() ?? null,
    clear,
    setClasses(next, hint) {
      if (destroyed || sameClasses(next, answer.classes)) return;
      answer.setClasses(next);
      if (hint !== undefined) emptyHint = hint;
      drawingVersion++;
      schedulePredict(0);
    },
    destroy() {
      if (destroyed) return;
      destroyed = true;
      if (timer !== null) clearTimeout(timer);
      resizeObserver.disconnect();
      canvas.removeEventListener('pointerdown', onPointerDown);
      canvas.removeEventListener('pointermove', onPointerMove);
      canvas.removeEventListener('pointerup', onPointerEnd);
      canvas.removeEventListener('pointercancel', onPointerEnd);
      canvas.removeEventListener('lostpointercapture', onPointerEnd);
      clearButton.removeEventListener('click', clear);
      root.remove();
    },
  };
}
