/**
 * Why Dawn found no Vulkan device, in one line that says what to try: what the lent GPU
 * machine's bench run prints first (scripts/gpu-trip/run.sh, `gpu-step.ts --diagnose`).
 *
 * The H200 run of 2026-11-26 found the NVIDIA driver and its Vulkan ICD file, but the
 * loader could not get vkCreateInstance from libGLX_nvidia.so.0
 * (VK_ERROR_INCOMPATIBLE_DRIVER): in a container the NVIDIA runtime mounts the driver's
 * graphics libraries (which hold its Vulkan driver) only when NVIDIA_DRIVER_CAPABILITIES
 * includes 'graphics'; 'compute,utility', the usual default for CUDA images, leaves them out.
 */
import { existsSync, readFileSync, readdirSync } from 'node:fs';

/** What the machine shows about its GPU and Vulkan, gathered once (gatherVulkanFacts) or given by a test. */
export interface VulkanFacts {
  /** Dawn's adapter, described; null when requestAdapter() found none. */
  adapter: string | null;
  /** GPU device nodes: /dev/nvidia0, /dev/dri/renderD128 … */
  deviceNodes: string[];
  /** The Vulkan ICD manifests (…/vulkan/icd.d/*.json) and the library each names. */
  icds: Array<{ file: string; library: string | null }>;
  /** Whether each ICD's library can be found (a path that exists, or a name ldconfig knows). */
  icdLibraryFound: boolean[];
  /** NVIDIA_DRIVER_CAPABILITIES, when set (the NVIDIA container runtime's). */
  nvidiaCapabilities: string | null;
  /** VK_ICD_FILENAMES / VK_DRIVER_FILES, when set. */
  icdOverride: string | null;
}

const ICD_DIRS = ['/usr/share/vulkan/icd.d', '/etc/vulkan/icd.d', '/usr/local/share/vulkan/icd.d'];

/** One line: the adapter, or why there is none and what to try. */
export function diagnoseVulkan(f: VulkanFacts): string {
  if (f.adapter !== null) return `Vulkan: ${f.adapter}`;
  const nvidia = f.deviceNodes.some((d) => d.startsWith('/dev/nvidia'));
  if (f.deviceNodes.length === 0) return 'no Vulkan device: no GPU device node (/dev/nvidia*, /dev/dri/*) in this machine or container; ask for one with the GPU passed through';
  const caps = f.nvidiaCapabilities;
  if (nvidia && caps !== null && caps !== 'all' && !caps.split(',').includes('graphics')) {
    return `no Vulkan device: NVIDIA_DRIVER_CAPABILITIES=${caps} leaves out 'graphics', so the driver's Vulkan library (libGLX_nvidia.so.0) is not mounted; run the container with NVIDIA_DRIVER_CAPABILITIES=all (or add graphics)`;
  }
  if (f.icds.length === 0) {
    return `no Vulkan device: ${nvidia ? 'the NVIDIA driver is here' : 'a GPU is here'} but no Vulkan ICD manifest (${ICD_DIRS.join(', ')}); install the driver's Vulkan part (libnvidia-gl, or mesa-vulkan-drivers) or set VK_ICD_FILENAMES to its *_icd.json`;
  }
  const missing = f.icds.filter((_, i) => !f.icdLibraryFound[i]);
  if (missing.length === f.icds.length) {
    return `no Vulkan device: the ICD manifest${missing.length > 1 ? 's' : ''} ${missing.map((m) => `${m.file} names ${m.library ?? 'no library'}`).join(', ')}, which is not on this machine; install the driver's graphics libraries of the same version as the kernel module`;
  }
  return `no Vulkan device: Dawn found no adapter though ${f.icds.map((i) => i.file).join(', ')} ${f.icds.length > 1 ? 'are' : 'is'} here${f.icdOverride ? ` (override: ${f.icdOverride})` : ''}; run again with VK_LOADER_DEBUG=error,warn,driver to see why the loader refused the driver (a driver library that does not match the kernel module reads as VK_ERROR_INCOMPATIBLE_DRIVER)`;
}

/** The library an ICD manifest names (ICD.library_path), or null when it cannot be read. */
function icdLibrary(file: string): string | null {
  try {
    const json = JSON.parse(readFileSync(file, 'utf8')) as { ICD?: { library_path?: string } };
    return json.ICD?.library_path ?? null;
  } catch (err) {
    process.stderr.write(`vulkan-diagnosis: ${file} is not a readable ICD manifest: ${(err as Error).message}\n`);
    return null;
  }
}

const list = (dir: string): string[] => (existsSync(dir) ? readdirSync(dir).map((f) => `${dir}/${f}`) : []);

/** This machine's facts; `adapter` from Dawn, `knownLibraries` from `ldconfig -p` (names the loader can open without a path). */
export function gatherVulkanFacts(adapter: string | null, knownLibraries: string): VulkanFacts {
  const deviceNodes = [...list('/dev').filter((d) => /^\/dev\/nvidia\d+$/.test(d)), ...list('/dev/dri').filter((d) => d.includes('renderD'))];
  const icds = ICD_DIRS.flatMap(list).filter((f) => f.endsWith('.json')).map((file) => ({ file, library: icdLibrary(file) }));
  const found = (lib: string | null) => lib !== null && (lib.includes('/') ? existsSync(lib) : knownLibraries.includes(lib));
  return {
    adapter,
    deviceNodes,
    icds,
    icdLibraryFound: icds.map((i) => found(i.library)),
    nvidiaCapabilities: process.env.NVIDIA_DRIVER_CAPABILITIES ?? null,
    icdOverride: process.env.VK_ICD_FILENAMES ?? process.env.VK_DRIVER_FILES ?? null,
  };
}
