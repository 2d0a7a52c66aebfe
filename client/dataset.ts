import { decodeMnist, type MnistDataset } from '../shared/data/mnist-format';
import { WebringError } from '../shared/protocol/errors';

/** Downloads the server's packed MNIST file (about 7.9 MB, cached by the browser). */
export async function fetchMnist(): Promise<MnistDataset> {
  const res = await fetch('/data/mnist.bin');
  if (!res.ok) throw new WebringError('ERR_BAD_DATA', `could not load MNIST: HTTP ${res.status}`);
  return decodeMnist(new Uint8Array(await res.arrayBuffer()));
}
