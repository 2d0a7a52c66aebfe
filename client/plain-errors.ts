/**
 * What a student reads when the server says no: one sentence per error code, in plain
 * words, with what to do next. The code stays visible in brackets for the teacher.
 */
import type { ErrorBody } from '../shared/protocol/errors';

export function plainWords(error: ErrorBody, room: string): string {
  switch (error.code) {
    case 'ERR_BAD_JOIN_CODE':
      return `That join code does not open room “${room}”. Check the code on the teacher’s screen (it looks like K7M-Q2P), or scan the class QR code again.`;
    case 'ERR_RATE_LIMITED':
      return 'Too many tries from this network in a short time. Wait a minute, then press Join again.';
    case 'ERR_ROOM_FULL':
      return `Room “${room}” is full. Ask your teacher to open another room.`;
    case 'ERR_SEAT_LIMIT':
      return `This network address already holds as many places in room “${room}” as one address may. Close a spare tab, or ask your teacher to allow more places per address.`;
    case 'ERR_TIMEOUT':
      return 'The classroom server did not answer. Check that you are on the class network, then press Join again.';
    case 'ERR_BAD_REQUEST':
      return `The server could not read that: ${error.message}.`;
    default:
      return `Something went wrong: ${error.message}.`;
  }
}

/** The sentence and the code, as the page shows them. */
export const describeRefusal = (error: ErrorBody, room: string): string => `${plainWords(error, room)} (${error.code})`;
