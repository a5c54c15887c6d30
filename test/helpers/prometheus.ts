/** Scrapes GET /metrics and reads it with a real Prometheus text-format parser. */
import parsePrometheusTextFormat, { type ParsedFamily, type ParsedSample } from 'parse-prometheus-text-format';

export class Scrape {
  readonly families: Map<string, ParsedFamily>;

  constructor(readonly text: string) {
    this.families = new Map(parsePrometheusTextFormat(text).map((family) => [family.name, family]));
  }

  family(name: string): ParsedFamily {
    const family = this.families.get(name);
    if (!family) throw new Error(`no metric ${name} in the scrape`);
    return family;
  }

  samples(name: string, labels: Record<string, string> = {}): ParsedSample[] {
    return this.family(name).metrics.filter((sample) => Object.entries(labels).every(([key, value]) => sample.labels?.[key] === value));
  }

  /** The sum of a counter's or gauge's samples that carry these labels (0 when none does). */
  value(name: string, labels: Record<string, string> = {}): number {
    return this.samples(name, labels).reduce((total, sample) => total + Number(sample.value), 0);
  }

  /**
   * A histogram's observation count, for one label set if given. parse-prometheus-text-format
   * reads only unlabelled histograms (it folds label sets into one sample and drops their counts),
   * so a labelled histogram is handed to it one label set at a time, with that set's labels
   * taken off: its HELP and TYPE lines, and the sample lines that carry exactly those labels.
   */
  count(name: string, labels: Record<string, string> = {}): number {
    if (Object.keys(labels).length === 0) return Number(this.family(name).metrics[0]?.count ?? 0);
    const wanted = Object.entries(labels).map(([key, value]) => `${key}=${JSON.stringify(value)}`);
    const lines: string[] = [];
    for (const line of this.text.split('\n')) {
      if (line.startsWith('# ')) {
        if (line.split(' ')[2] === name) lines.push(line);
        continue;
      }
      const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} (.*)$/.exec(line);
      if (!match || !match[1]!.startsWith(`${name}_`)) continue;
      const pairs = match[2]!.split(/,(?=[a-zA-Z_]+=")/);
      const others = pairs.filter((pair) => !pair.startsWith('le='));
      if (others.length !== wanted.length || !wanted.every((pair) => others.includes(pair))) continue;
      const le = pairs.filter((pair) => pair.startsWith('le='));
      lines.push(`${match[1]}${le.length ? `{${le.join(',')}}` : ''} ${match[3]}`);
    }
    const [family] = parsePrometheusTextFormat(`${lines.join('\n')}\n`);
    return Number(family?.metrics[0]?.count ?? 0);
  }

  /** Every value that label takes in a metric. */
  labelValues(name: string, label: string): string[] {
    return [...new Set(this.family(name).metrics.map((sample) => sample.labels?.[label]).filter((value): value is string => value !== undefined))];
  }
}

export async function scrape(url: string, token: string): Promise<Scrape> {
  const response = await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${token}` } });
  if (response.status !== 200) throw new Error(`GET /metrics answered ${response.status}: ${await response.text()}`);
  return new Scrape(await response.text());
}
