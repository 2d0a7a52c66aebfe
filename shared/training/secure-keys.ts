/**
 * A worker's side of secure aggregation's key exchange: while a secure run is on, it makes
 * and publishes a key pair for every generation this member belongs to (`secagg:key`
 * through the signaling server), and hears its classmates' keys into one KeyDirectory
 * (shared/secagg/key-directory.ts). A run gets a SecureAggregation over that directory.
 */
import type { Socket } from 'socket.io-client';
import type { ClientToServerEvents, Generation, ServerToClientEvents, StartConfig } from '../protocol';
import { KeyDirectory, type KeyRing } from '../secagg/key-directory';
import { SecureAggregation } from '../secagg/secure-collective';
import { canAggregateSecurely } from '../secagg/pair-keys';
import { WebringError } from '../protocol/errors';
import type { Clock } from '../util/clock';

export class SecureKeys {
  private readonly directory: KeyDirectory;
  /** The secure run under way and the generation it started on; null while no secure run is on. */
  private secure: { run: number; from: number } | null = null;

  constructor(
    socket: Socket<ServerToClientEvents, ClientToServerEvents>,
    private readonly clock: Clock,
    private readonly log: (message: string) => void,
  ) {
    this.directory = new KeyDirectory(
      ({ run, generation }, publicKey) =>
        socket.emit('secagg:key', { run, generation, publicKey }, (r) => {
          if (!r.ok) log(`secure aggregation: key for run ${run}, generation ${generation} refused: ${r.error.code} ${r.error.message}`);
        }),
      clock,
      log,
    );
    socket.on('secagg:key', (k) => this.directory.heard({ run: k.run, generation: k.generation }, k.member, k.publicKey));
  }

  /**
   * Run `run` starts on `generation`: for a secure one, this member's key for it goes out
   * now and the run masks over the directory; undefined for a run that does not mask.
   * ERR_BAD_STATE where this device has no WebCrypto (plain http from another computer).
   */
  runStarting(config: StartConfig, run: number, generation: number): SecureAggregation | undefined {
    if (!config.secureAggregation) {
      this.secure = null;
      return undefined;
    }
    if (!canAggregateSecurely()) {
      throw new WebringError('ERR_BAD_STATE', 'this run masks its gradients (secure aggregation), which needs WebCrypto: open the class link over https');
    }
    this.secure = { run, from: generation };
    this.publish({ run, generation });
    return new SecureAggregation(this.directory, this.clock, this.log);
  }

  /** A generation was announced: a member of a secure run publishes its key for it. */
  generation(g: Generation, selfId: string | null): void {
    const secure = this.secure;
    if (secure === null || g.generation < secure.from || !g.members.some((m) => m.id === selfId)) return;
    this.publish({ run: secure.run, generation: g.generation });
  }

  /**
   * The run is over: no more keys. The last generation's stay until the next secure run
   * uses a newer one (SecureAggregation.over forgets older ones): classmates of a run that
   * already started may have published theirs while this one was still unwinding.
   */
  runEnded(): void {
    this.secure = null;
  }

  private publish(ring: KeyRing): void {
    this.directory.ensureOwn(ring).catch((err: unknown) => this.log(`secure aggregation: no key pair for run ${ring.run}, generation ${ring.generation}: ${(err as Error).message}`));
  }
}
