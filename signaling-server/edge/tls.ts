/**
 * The HTTPS certificate. Browsers expose WebGPU and crypto.subtle only in a secure context,
 * and a page from http://<LAN address> is not one (https://w3c.github.io/webappsec-secure-contexts/;
 * only localhost is exempt), so students on other laptops need HTTPS. The teacher's own
 * certificate (TLS_CERT, TLS_KEY) is used when given; otherwise a self-signed one is made on
 * first start, kept in DATA_DIR/tls/ and reused, so the browser warning comes once per laptop.
 */
import { X509Certificate, createPrivateKey, randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { generate } from 'selfsigned';

const CERT_VALID_DAYS = 365;
/** A kept certificate this close to its end is replaced at start-up. */
export const CERT_RENEW_BEFORE_MS = 30 * 24 * 3600 * 1000;
/** Certificates start a day early: a student laptop whose clock is behind would refuse one from the future. */
const CLOCK_SKEW_MS = 24 * 3600 * 1000;

/** Start-up errors only (they never cross the wire), hence not in the shared ErrorCode union. */
export type TlsErrorCode = 'ERR_TLS_CONFIG' | 'ERR_TLS_UNREADABLE' | 'ERR_TLS_INVALID';

export class TlsError extends Error {
  readonly code: TlsErrorCode;
  constructor(code: TlsErrorCode, message: string) {
    super(message);
    this.name = 'TlsError';
    this.code = code;
  }
}

/** What a generated certificate must be valid for (its subjectAltName). */
export interface CertificateNames {
  dns: string[];
  ips: string[];
}

export interface TlsCredentials {
  /** PEM; may hold a chain when it comes from TLS_CERT. */
  cert: string;
  key: string;
  /** 'files': TLS_CERT and TLS_KEY; 'generated': made by this start; 'reused': made by an earlier one. */
  source: 'files' | 'generated' | 'reused';
  certPath: string;
  keyPath: string;
  validTo: Date;
  /** SHA-256 fingerprint, as the browser's certificate viewer shows it. */
  fingerprint256: string;
  /** Why a new certificate was made (first start, new LAN address, expiring), for the log. */
  reason?: string;
}

export interface TlsOptions {
  dataDir: string;
  certPath?: string;
  keyPath?: string;
  names?: CertificateNames;
  now?: Date;
}

/** This machine's non-internal addresses, IPv4 first: the ones students can reach. */
export function lanAddresses(interfaces: NodeJS.Dict<os.NetworkInterfaceInfo[]> = os.networkInterfaces()): string[] {
  const all = Object.values(interfaces).flat().filter((a): a is os.NetworkInterfaceInfo => !!a && !a.internal);
  return [...new Set([...all.filter((a) => a.family === 'IPv4'), ...all.filter((a) => a.family === 'IPv6')].map((a) => a.address))];
}

/** localhost, the host name (and its mDNS .local name), loopback and every LAN address. */
export function defaultCertificateNames(hostname = os.hostname(), addresses = lanAddresses()): CertificateNames {
  const dns = ['localhost'];
  if (/^[A-Za-z0-9.-]+$/.test(hostname) && hostname !== 'localhost') {
    dns.push(hostname);
    if (!hostname.includes('.')) dns.push(`${hostname}.local`);
  }
  return { dns, ips: ['127.0.0.1', '::1', ...addresses] };
}

/** The teacher's certificate if TLS_CERT and TLS_KEY are given, else the kept or a new self-signed one. */
export async function loadTlsCredentials(options: TlsOptions): Promise<TlsCredentials> {
  const now = options.now ?? new Date();
  if (options.certPath || options.keyPath) {
    if (!options.certPath || !options.keyPath) {
      throw new TlsError('ERR_TLS_CONFIG', 'TLS_CERT and TLS_KEY go together: set both (PEM files) or neither');
    }
    const cert = await readPem(options.certPath, 'TLS_CERT');
    const key = await readPem(options.keyPath, 'TLS_KEY');
    const x509 = parsePair(cert, key, `TLS_CERT=${options.certPath}`, `TLS_KEY=${options.keyPath}`);
    const validTo = new Date(x509.validTo);
    if (validTo <= now) throw new TlsError('ERR_TLS_INVALID', `TLS_CERT=${options.certPath}: the certificate expired on ${validTo.toISOString()}`);
    return { cert, key, source: 'files', certPath: options.certPath, keyPath: options.keyPath, validTo, fingerprint256: x509.fingerprint256 };
  }

  const dir = path.join(options.dataDir, 'tls');
  const certPath = path.join(dir, 'cert.pem');
  const keyPath = path.join(dir, 'key.pem');
  const names = options.names ?? defaultCertificateNames();
  const kept = await keptCertificate(certPath, keyPath, names, now);
  if ('x509' in kept) {
    return { cert: kept.cert, key: kept.key, source: 'reused', certPath, keyPath, validTo: new Date(kept.x509.validTo), fingerprint256: kept.x509.fingerprint256 };
  }

  const pems = await generate(
    [
      { name: 'commonName', value: 'webring classroom server' },
      { name: 'organizationName', value: "webring (self-signed on the teacher's computer)" },
    ],
    {
      keyType: 'ec',
      curve: 'P-256',
      algorithm: 'sha256',
      notBeforeDate: new Date(now.getTime() - CLOCK_SKEW_MS),
      notAfterDate: new Date(now.getTime() + CERT_VALID_DAYS * 24 * 3600 * 1000),
      extensions: [
        { name: 'basicConstraints', cA: false },
        { name: 'keyUsage', digitalSignature: true, critical: true },
        { name: 'extKeyUsage', serverAuth: true },
        {
          name: 'subjectAltName',
          altNames: [...names.dns.map((value) => ({ type: 2 as const, value })), ...names.ips.map((ip) => ({ type: 7 as const, ip }))],
        },
      ],
    },
  );
  await fs.mkdir(dir, { recursive: true, mode: 0o700 });
  // Key first: a crash between the two renames leaves a pair that does not match, which the
  // next start notices and replaces.
  await writeAtomic(keyPath, pems.private, 0o600);
  await writeAtomic(certPath, pems.cert, 0o644);
  const x509 = new X509Certificate(pems.cert);
  return { cert: pems.cert, key: pems.private, source: 'generated', certPath, keyPath, validTo: new Date(x509.validTo), fingerprint256: x509.fingerprint256, reason: kept.problem };
}

async function readPem(file: string, variable: string): Promise<string> {
  try {
    return await fs.readFile(file, 'utf8');
  } catch (err) {
    throw new TlsError('ERR_TLS_UNREADABLE', `${variable}=${file}: cannot read it (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
  }
}

function parsePair(cert: string, key: string, certLabel: string, keyLabel: string): X509Certificate {
  let x509: X509Certificate;
  try {
    x509 = new X509Certificate(cert);
  } catch {
    throw new TlsError('ERR_TLS_INVALID', `${certLabel}: not a PEM certificate`);
  }
  let privateKey;
  try {
    privateKey = createPrivateKey(key);
  } catch {
    throw new TlsError('ERR_TLS_INVALID', `${keyLabel}: not an unencrypted PEM private key`);
  }
  if (!x509.checkPrivateKey(privateKey)) throw new TlsError('ERR_TLS_INVALID', `${keyLabel} is not the key of ${certLabel}`);
  return x509;
}

/** The certificate of an earlier start, or why it cannot be used. */
async function keptCertificate(
  certPath: string,
  keyPath: string,
  names: CertificateNames,
  now: Date,
): Promise<{ cert: string; key: string; x509: X509Certificate } | { problem: string }> {
  let cert: string;
  let key: string;
  try {
    [cert, key] = await Promise.all([fs.readFile(certPath, 'utf8'), fs.readFile(keyPath, 'utf8')]);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { problem: 'first start' };
    throw err;
  }
  let x509: X509Certificate;
  try {
    x509 = parsePair(cert, key, certPath, keyPath);
  } catch (err) {
    return { problem: (err as Error).message };
  }
  if (new Date(x509.validTo).getTime() - now.getTime() < CERT_RENEW_BEFORE_MS) return { problem: `it ends on ${x509.validTo}` };
  const missing = [...names.dns.filter((n) => x509.checkHost(n) === undefined), ...names.ips.filter((ip) => x509.checkIP(ip) === undefined)];
  if (missing.length > 0) return { problem: `it does not cover ${missing.join(', ')}` };
  return { cert, key, x509 };
}

async function writeAtomic(file: string, data: string, mode: number): Promise<void> {
  const tmp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  try {
    const handle = await fs.open(tmp, 'wx', mode);
    try {
      await handle.writeFile(data);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await fs.rename(tmp, file);
  } catch (err) {
    await fs.rm(tmp, { force: true });
    throw err;
  }
}
