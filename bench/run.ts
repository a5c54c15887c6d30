/**
 * `npm run bench`: every figure is a ratio of two things measured side by side in the same run,
 * printed as a table of medians and written to BENCHMARKS.md with the machine it ran on.
 * `npm run bench -- creates streaming` runs only those (and does not rewrite BENCHMARKS.md).
 */
import { writeFileSync } from 'node:fs';
import { packagePath } from '../src/paths.js';
import { benchChat } from './chat.js';
import { benchCreates } from './creates.js';
import { benchEmbeddings } from './embeddings.js';
import { benchFootprint } from './footprint.js';
import { benchPull } from './pull.js';
import { benchGgufValidation } from './gguf-validation.js';
import { benchObservability } from './observability.js';
import { benchGrammar } from './grammar.js';
import { benchGrammarService } from './grammar-service.js';
import { benchMultiseq } from './multiseq.js';
import { benchRecovery } from './recovery.js';
import { benchResume } from './resume.js';
import { benchStreaming } from './streaming.js';
import { benchStorage } from './storage.js';
import { benchSweep } from './sweep.js';
import { log, machine, runs, settleDisk, type Figure } from './lib.js';

const BENCHMARKS: Record<string, () => Promise<Figure | Figure[]>> = {
  creates: benchCreates,
  streaming: benchStreaming,
  recovery: benchRecovery,
  resume: benchResume,
  sweep: benchSweep,
  footprint: benchFootprint,
  pull: benchPull,
  'gguf-validation': benchGgufValidation,
  observability: benchObservability,
  embeddings: benchEmbeddings,
  grammar: benchGrammar,
  'grammar-service': benchGrammarService,
  chat: benchChat,
  storage: benchStorage,
  slots: benchMultiseq,
};

function format(value: number, unit: string): string {
  const digits = value >= 100 ? 0 : value >= 10 ? 1 : 2;
  return `${value.toFixed(digits)} ${unit}`;
}

function table(figures: Figure[]): string {
  const rows = figures.map((figure) => [
    figure.name,
    format(figure.value, figure.unit),
    figure.baseline ? format(figure.baseline, figure.unit) : '-',
    figure.baseline ? figure.ratio.toFixed(2) : '-',
    figure.target,
    figure.met ? 'yes' : 'no',
  ]);
  const header = ['figure', 'lmsp', 'baseline', 'ratio', 'target', 'met'];
  return [`| ${header.join(' | ')} |`, `| ${header.map(() => '---').join(' | ')} |`, ...rows.map((row) => `| ${row.join(' | ')} |`)].join('\n');
}

const selected = process.argv.slice(2);
const names = selected.length > 0 ? selected : Object.keys(BENCHMARKS);
const unknown = names.filter((name) => !BENCHMARKS[name]);
if (unknown.length > 0) {
  console.error(`unknown benchmark ${unknown.join(', ')}; choose from ${Object.keys(BENCHMARKS).join(', ')}`);
  process.exit(2);
}

const figures: Figure[] = [];
const started = Date.now();
for (const name of names) {
  log(`running ${name}`);
  settleDisk();
  const result = await BENCHMARKS[name]!();
  figures.push(...(Array.isArray(result) ? result : [result]));
}
const output = table(figures);
console.log(output);
for (const figure of figures) console.log(`- ${figure.name}: ${figure.how}; samples lmsp ${figure.samples.value.map((v) => v.toFixed(1)).join(', ')}${figure.samples.baseline.length ? `; baseline ${figure.samples.baseline.map((v) => v.toFixed(1)).join(', ')}` : ''}${figure.extra ? `; ${JSON.stringify(figure.extra)}` : ''}`);

if (selected.length === 0) {
  const info = machine();
  const document = [
    '# Benchmarks',
    '',
    'Produced by `npm run bench` (medians of ' + runs() + ' runs each; `BENCH_RUNS` changes that). This machine is shared and noisy:',
    'each figure is a ratio of two things measured side by side in the same run, not an absolute speed.',
    '',
    `Measured ${new Date().toISOString().slice(0, 10)} on ${info.cpu}, ${info.memory}, ${info.os}, Node.js ${info.node}; the load generator ran on the same machine.`,
    '',
    output,
    '',
    '## How each figure is measured',
    '',
    ...figures.map((figure) => `- **${figure.name}**: ${figure.how}. Samples: lmsp ${figure.samples.value.map((v) => v.toFixed(1)).join(', ')}${figure.samples.baseline.length ? `; baseline ${figure.samples.baseline.map((v) => v.toFixed(1)).join(', ')}` : ''}${figure.extra ? ` (${Object.entries(figure.extra).map(([k, v]) => `${k} ${v}`).join(', ')})` : ''}.`),
    '',
    `The whole run took ${Math.round((Date.now() - started) / 1000)} s.`,
    '',
  ].join('\n');
  writeFileSync(packagePath('BENCHMARKS.md.new'), document);
  log('wrote BENCHMARKS.md.new (move it over BENCHMARKS.md after adding notes)');
}
