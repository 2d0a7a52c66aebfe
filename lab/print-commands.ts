/**
 * Prints the exact commands of every model for a lab of two workers, as docs/lab-models.md shows
 * them (test/unit/lab-models.test.ts checks that the page still matches):
 *
 *   node --import tsx lab/print-commands.ts
 */
import { internet, isolationCommands, schoolWifiIsolated, shapingCommands, topologyCommands, wifi, wiredLab } from './network-models';

const WORKERS = 2;
const block = (title: string, lines: string[][]) => `${title}\n\n\`\`\`sh\n${lines.map((c) => c.join(' ')).join('\n')}\n\`\`\`\n`;

console.log(block(`#### Topology (every model, ${WORKERS} workers)`, topologyCommands(WORKERS)));
for (const model of [wifi(), wiredLab(), internet()]) {
  console.log(block(`#### \`${model.name}\` ${JSON.stringify(model.params)}`, shapingCommands(model, WORKERS, false)));
}
console.log(block(`#### \`school-wifi-isolated\`: \`wifi\`'s commands, then`, isolationCommands(schoolWifiIsolated(), WORKERS)));
