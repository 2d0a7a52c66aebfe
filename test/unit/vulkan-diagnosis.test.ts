/**
 * The lent GPU machine's one-line diagnosis of a missing Vulkan device
 * (test/bench/vulkan-diagnosis.ts): each cause a real machine showed or can show gets its
 * own line and its own remedy. The bench itself needs a GPU and never runs in the tests.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { diagnoseVulkan, gatherVulkanFacts, type VulkanFacts } from '../bench/vulkan-diagnosis';

const H200: VulkanFacts = {
  adapter: null,
  deviceNodes: ['/dev/nvidia0'],
  icds: [{ file: '/usr/share/vulkan/icd.d/nvidia_icd.json', library: 'libGLX_nvidia.so.0' }],
  icdLibraryFound: [true],
  nvidiaCapabilities: 'compute,utility',
  icdOverride: null,
};

test('a container without the graphics capability: the line names NVIDIA_DRIVER_CAPABILITIES and what to set', () => {
  const line = diagnoseVulkan(H200);
  assert.match(line, /^no Vulkan device: NVIDIA_DRIVER_CAPABILITIES=compute,utility leaves out 'graphics'.*NVIDIA_DRIVER_CAPABILITIES=all/);
  assert.equal(line.split('\n').length, 1);
});

test('each other cause gets its own remedy, and an adapter is named', () => {
  assert.equal(diagnoseVulkan({ ...H200, adapter: 'NVIDIA H200 (nvidia 580)' }), 'Vulkan: NVIDIA H200 (nvidia 580)');
  assert.match(diagnoseVulkan({ ...H200, deviceNodes: [] }), /no GPU device node/);
  assert.match(diagnoseVulkan({ ...H200, nvidiaCapabilities: 'all', icds: [], icdLibraryFound: [] }), /no Vulkan ICD manifest.*VK_ICD_FILENAMES/);
  assert.match(diagnoseVulkan({ ...H200, nvidiaCapabilities: 'graphics,compute', icdLibraryFound: [false] }), /names libGLX_nvidia\.so\.0, which is not on this machine/);
  // Everything looks right and still no adapter: the loader's own debug output is the next step.
  assert.match(diagnoseVulkan({ ...H200, nvidiaCapabilities: null }), /VK_LOADER_DEBUG=error,warn,driver/);
});

test("this machine's facts: no GPU node, so the first cause", () => {
  const facts = gatherVulkanFacts(null, '');
  assert.equal(facts.adapter, null);
  if (facts.deviceNodes.length === 0) assert.match(diagnoseVulkan(facts), /no GPU device node/);
  else assert.match(diagnoseVulkan(facts), /^no Vulkan device: /);
});
