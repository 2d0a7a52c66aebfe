/**
 * The dashboard's view of the HTTP API (docs/http-api.md): the library's RoomControl
 * (`webring/control`, the teacher's controls any program uses, without tfjs), with every
 * failure turned into a coded ErrorBody value instead of a thrown exception, so each panel
 * decides where to show it. Download links, which cannot carry a header, carry the join code.
 */
import { RoomControl, toWebringError, type CheckpointInfo, type CheckpointMetadata, type CollectSetting, type ErrorBody, type RoomJoinInfo, type RoomMetrics, type RoomStatus, type StartOptions, type StatusSnapshot } from '../../shared/library/control';
import type { NetworkCheckRequest } from '../../shared/protocol';

export type RoomAction = 'start' | 'stop' | 'pause' | 'resume';

export type Result<T> = { ok: true; value: T } | { ok: false; error: ErrorBody };

export type { StartOptions, StatusSnapshot };

async function result<T>(call: Promise<T>): Promise<Result<T>> {
  try {
    return { ok: true, value: await call };
  } catch (err) {
    return { ok: false, error: toWebringError(err).toBody() };
  }
}

export class RoomApi {
  readonly base: string;
  private readonly control: RoomControl;
  /** The join code, once joinInfo has read it: download links carry it (a link cannot carry a header). */
  private joinCode: string | null = null;

  constructor(
    readonly room: string,
    token: string,
  ) {
    this.base = `/api/rooms/${encodeURIComponent(room)}`;
    this.control = new RoomControl({ url: location.origin, teacherToken: token });
  }

  status(): Promise<Result<StatusSnapshot>> {
    return result(this.control.statusSnapshot(this.room));
  }

  /** The join code and class links (LAN https first), for the joining card. */
  async joinInfo(): Promise<Result<RoomJoinInfo>> {
    const info = await result(this.control.joinInfo(this.room));
    if (info.ok) this.joinCode = info.value.code;
    return info;
  }

  /** Asks every device to measure its network (POST network-check); the answers come in the status. */
  networkCheck(request: NetworkCheckRequest = {}): Promise<Result<number>> {
    return result(this.control.networkCheck(this.room, request));
  }

  metrics(): Promise<Result<RoomMetrics>> {
    return result(this.control.metrics(this.room));
  }

  checkpoints(): Promise<Result<CheckpointInfo[]>> {
    return result(this.control.checkpoints(this.room));
  }

  /** Deletes checkpoint `id`; the answer is the room's checkpoints without it. */
  deleteCheckpoint(id: string): Promise<Result<CheckpointInfo[]>> {
    return result(this.control.deleteCheckpoint(this.room, id));
  }

  checkpointMetadata(id: string): Promise<Result<CheckpointMetadata>> {
    return result(this.control.checkpointMetadata(this.room, id));
  }

  fileUrl(id: string, file: string): string {
    const url = `${this.base}/checkpoints/${encodeURIComponent(id)}/${file}`;
    return this.joinCode ? `${url}?code=${this.joinCode}` : url;
  }

  /** What reading the room's files needs, for tf.loadLayersModel's requests. */
  get readHeaders(): Record<string, string> {
    return this.control.readHeaders;
  }

  /** Opens (a task's items, and its classes) or closes (null) collecting for the lesson's own examples. */
  collect(setting: CollectSetting | null): Promise<Result<RoomStatus>> {
    return result(this.control.collect(this.room, setting));
  }

  /** Sets (1 to MAX_ROOM_MEMBERS) or clears (null: the defaults) the seats one client address may hold. */
  seats(perAddress: number | null): Promise<Result<RoomStatus>> {
    return result(this.control.seats(this.room, perAddress));
  }

  /** Vouches (or stops) that members sharing an address are distinct devices (secure aggregation counts each). */
  vouch(vouched: boolean): Promise<Result<RoomStatus>> {
    return result(this.control.vouch(this.room, vouched));
  }

  act(action: RoomAction, body: StartOptions = {}): Promise<Result<RoomStatus>> {
    return result(action === 'start' ? this.control.start(this.room, body) : this.control[action](this.room));
  }

  /** Removes the room's hub; no hub joins until allowHub(). */
  removeHub(): Promise<Result<RoomStatus>> {
    return result(this.control.removeHub(this.room));
  }

  /** Lets a hub join again after removeHub(). */
  allowHub(): Promise<Result<RoomStatus>> {
    return result(this.control.allowHub(this.room));
  }
}
