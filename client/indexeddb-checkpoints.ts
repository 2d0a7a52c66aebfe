/**
 * The chief's own checkpoint copies in this tab's IndexedDB, through tfjs's `indexeddb://`
 * handler: `indexeddb://webring/<room>/<step>`, each loadable as a model with
 * tf.loadLayersModel (shared/checkpoints/tfio-checkpoints.ts).
 */
import { tfIoCheckpoints } from '../shared/checkpoints/tfio-checkpoints';

export const indexedDbCheckpoints = tfIoCheckpoints('indexeddb://webring');
