/**
 * The MNIST task's pages: the try panel is the digit pad, asking the live weights on the
 * student page and the latest checkpoint on the teacher's. The pad hands the model a
 * drawing prepared the way MNIST's digits were (../digit-preprocess.ts).
 */
import { sameClasses } from '../../../protocol';
import type { TaskPages, TryPanel, TryPanelOptions } from '../../try-panel';
import { DIGIT_CLASSES } from '../format';
import { mountDigitPad } from './digit-pad';

/** What to draw, in one sentence, for the digits or the class's own classes. */
function hintFor(classes: readonly string[], source: TryPanelOptions['source']): string {
  const who = source === 'live' ? 'The network you are training right now guesses it.' : 'The latest checkpoint guesses it.';
  return sameClasses(classes, DIGIT_CLASSES) ? `Draw a digit from 0 to 9. ${who}` : `Draw one of the class's own classes (${classes.join(', ')}). ${who}`;
}

export const mnistPages: TaskPages = {
  mountTry(container, options): TryPanel {
    let hint = hintFor(options.classes, options.source);
    const pad = mountDigitPad(container, {
      title: 'Draw on the pad',
      emptyHint: hint,
      classes: options.classes,
      predict: (input) => options.ask(input, 1),
    });
    return {
      get hint() {
        return hint;
      },
      refresh: () => pad.refresh(),
      setEnabled: (enabled, reason) => pad.setEnabled(enabled, reason),
      setClasses(classes) {
        hint = hintFor(classes, options.source);
        pad.setClasses(classes, hint);
      },
      input: () => pad.input(),
      clear: () => pad.clear(),
      destroy: () => pad.destroy(),
    };
  },
};
