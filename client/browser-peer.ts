/** PeerFactory for browser tabs: simple-peer's bundle over the browser's RTCPeerConnection. */
import SimplePeer from 'simple-peer/simplepeer.min.js';
import { createSimplePeerFactory } from '../shared/simple-peer-factory';

/** Empty: tabs on one LAN reach each other through host candidates; TURN comes later. */
export const browserPeerFactory = createSimplePeerFactory(SimplePeer, { iceServers: [] });
