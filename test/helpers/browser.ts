/**
 * Headless Chromium (Debian's `chromium` package) driven by playwright-core, which downloads no
 * browser of its own. Each test gets a fresh profile; pages fail the test on a script error or a
 * Content-Security-Policy violation; axe-core checks a view for accessibility.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { LmspClient } from '../../src/api/client.js';
import { packagePath } from '../../src/paths.js';
import type { TestService } from './service.js';

export const CHROMIUM = '/usr/bin/chromium';
export const CHROMIUM_FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

/** Why the browser tests cannot run here, or null when they can. */
export const NO_BROWSER = existsSync(CHROMIUM) ? null : `no Chromium at ${CHROMIUM} (apt-get install chromium)`;

export const SCREENSHOTS = packagePath('.lmsp-test', 'screenshots');

const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

export interface Browser {
  context: BrowserContext;
  /** Script errors and CSP violations seen by any page of this browser. */
  problems: string[];
  newPage(): Promise<Page>;
  close(): Promise<void>;
}

export async function openBrowser(): Promise<Browser> {
  const profile = mkdtempSync(join(tmpdir(), 'lmsp-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_FLAGS,
    viewport: { width: 1280, height: 900 },
    reducedMotion: 'reduce',
  });
  const problems: string[] = [];
  const watch = (page: Page) => {
    page.on('pageerror', (error) => problems.push(`script error: ${error.message}`));
    page.on('console', (message) => {
      if (/Content Security Policy/i.test(message.text())) problems.push(`CSP: ${message.text()}`);
    });
  };
  context.pages().forEach(watch);
  context.on('page', watch);
  return {
    context,
    problems,
    newPage: async () => context.pages().find((page) => page.url() === 'about:blank') ?? context.newPage(),
    close: async () => {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

export async function withBrowser<T>(test: (browser: Browser) => Promise<T>): Promise<T> {
  const browser = await openBrowser();
  try {
    const result = await test(browser);
    if (browser.problems.length > 0) throw new Error(`the page had problems:\n${browser.problems.join('\n')}`);
    return result;
  } finally {
    await browser.close();
  }
}

export async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true });
}

interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: Array<{ target: string[] }>;
}

/** Runs axe-core in the page; returns its violations of every impact (minor to critical). */
export async function axeViolations(page: Page): Promise<string[]> {
  // Evaluated through the DevTools protocol, so the page's CSP (scripts from 'self' only) allows it.
  await page.evaluate(axeSource);
  const violations = await page.evaluate("axe.run(document, { resultTypes: ['violations'] }).then((result) => result.violations)") as AxeViolation[];
  return violations.map((violation) => `${violation.impact} ${violation.id}: ${violation.help} (${violation.nodes.map((node) => node.target.join(' ')).join('; ')})`);
}

/** Signs a page in with a new pairing code made by the operator; returns a client with the page's token. */
export async function signIn(page: Page, service: TestService, scopes: string[], name = 'dashboard'): Promise<LmspClient> {
  const code = await service.client.createPairingCode({ name, scopes });
  await page.goto(`${service.url}/`);
  await page.getByLabel('Pairing code').fill(code.code);
  await page.getByLabel('Name of this session').fill(name);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('navigation', { name: 'Sections' }).waitFor();
  const session = JSON.parse(await page.evaluate("sessionStorage.getItem('lmsp.session')") as string) as { token: string };
  return new LmspClient({ baseUrl: service.url, token: session.token });
}
