/**
 * Names of the class's own (a names run's `data: 'own'` or `'dataset+own'`): a student types
 * names (their own, their family's, invented ones), and each stays on their device as its
 * symbols. A name gives its examples exactly as a dataset name does (names-text.ts): one per
 * character and one for the end mark, so a run on own names learns the same task, scored on
 * the dataset's held-out names, and a name is trained or held out whole.
 */
import { WebringError } from '../../protocol/errors';
import type { OwnText } from '../task';
import { CONTEXT, END, VOCAB_SIZE, decodeSymbols, encodeName, isEncodable, writeContext } from './names-text';

/** The longest name a student may add: the datasets' longest is 15 characters. */
export const MAX_OWN_NAME_CHARS = 24;

export const OWN_NAMES: OwnText = {
  collects: 'text',
  label: 'names',
  maxChars: MAX_OWN_NAME_CHARS,
  encode(text) {
    // As the dataset's names are normalised (normaliseNames): trimmed and lower-cased.
    const name = text.trim().toLowerCase();
    if (name.length === 0) throw new WebringError('ERR_BAD_REQUEST', 'type a name first', 'name');
    if (name.length > MAX_OWN_NAME_CHARS) throw new WebringError('ERR_BAD_REQUEST', `a name has at most ${MAX_OWN_NAME_CHARS} letters`, 'name');
    if (!isEncodable(name)) throw new WebringError('ERR_BAD_REQUEST', `"${name.slice(0, MAX_OWN_NAME_CHARS)}": a name here is letters a–z and "-" only`, 'name');
    return Float32Array.from(encodeName(name));
  },
  decode: (item) => decodeSymbols(item),
  check(item) {
    if (item.length < 1 || item.length > MAX_OWN_NAME_CHARS) throw new WebringError('ERR_BAD_REQUEST', `a name has 1 to ${MAX_OWN_NAME_CHARS} letters, got ${item.length}`, 'name');
    for (let i = 0; i < item.length; i++) {
      const s = item[i]!;
      // Characters only: the end mark (0) ends a name, it is not one of its letters.
      if (!Number.isInteger(s) || s <= END || s >= VOCAB_SIZE) throw new WebringError('ERR_BAD_REQUEST', `a name's symbols are 1 to ${VOCAB_SIZE - 1}, got ${s} at ${i}`, 'name');
    }
  },
  examplesIn: (size) => size + 1,
  writeExample(item, k, _labelTarget, out, at) {
    writeContext(item, k, CONTEXT, out, at);
    return k < item.length ? item[k]! : END;
  },
};
