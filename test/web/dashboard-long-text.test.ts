/**
 * Long text on the dashboard (LMSP 15): a response whose input and instructions run to hundreds
 * of lines, and a stored chat completion with a long message. Each long box scrolls inside the
 * page, is a named region a keyboard can reach and scroll (axe: scrollable-region-focusable), and a
 * short box stays out of the tab order; ids in headings do not widen a 390 px page.
 */
import assert from 'node:assert/strict';
import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import type { ChatCompletionObject } from '../../src/api/chat-completions.js';
import { NO_BROWSER, screenshot, axeViolations, signIn, withBrowser } from '../helpers/browser.js';
import { api, pairClient, withService } from '../helpers/service.js';

const LONG = Array.from({ length: 300 }, (_, line) => `line ${line + 1} of a long paste`).join('\n');

interface Box { label: string | null; role: string | null; tabIndex: string | null; overflows: boolean }

async function boxes(page: Page, selector: string): Promise<Box[]> {
  return await page.locator(selector).evaluateAll((elements) => elements.map((element) => ({
    label: element.getAttribute('aria-label'),
    role: element.getAttribute('role'),
    tabIndex: element.getAttribute('tabindex'),
    overflows: element.scrollHeight > element.clientHeight + 1,
  })));
}

/** Tabs until the named region has the focus, then scrolls it with the keyboard alone. */
async function scrollByKeyboard(page: Page, label: string): Promise<void> {
  const region = page.getByRole('region', { name: label });
  await page.locator('h1').focus();
  const focused = async () => await page.evaluate("document.activeElement?.getAttribute('aria-label')") as string | null;
  for (let stop = 0; stop < 40 && (await focused()) !== label; stop += 1) await page.keyboard.press('Tab');
  assert.equal(await focused(), label, `Tab reaches "${label}"`);
  assert.equal(await region.evaluate((element) => element.scrollTop), 0);
  await page.keyboard.press('PageDown');
  await page.waitForFunction((element) => element!.scrollTop > 0, await region.elementHandle(), { timeout: 5000 });
}

async function fitsPhone(page: Page, what: string, shot: string): Promise<void> {
  await page.setViewportSize({ width: 390, height: 844 });
  await page.waitForFunction('document.documentElement.scrollWidth <= 390', undefined, { timeout: 5000 }).catch(() => undefined);
  const width = await page.evaluate('document.documentElement.scrollWidth') as number;
  assert.ok(width <= 390, `${what} is ${width} px wide at 390 px`);
  assert.deepEqual(await axeViolations(page), [], `accessibility violations on ${what} at 390 px`);
  await screenshot(page, shot);
  await page.setViewportSize({ width: 1280, height: 900 });
}

describe('long text on the dashboard (LMSP 15)', { skip: NO_BROWSER ?? false }, () => {
  test('a client name of 200 characters wraps in the Clients table: its Revoke button stays in sight', { timeout: 120_000 }, () =>
    withService({}, (service) => withBrowser(async (browser) => {
      // Words of a name people write, and one word as long as a name may be.
      const names = [Array.from({ length: 25 }, (_, word) => `agent${word}`).join(' ').slice(0, 200), 'n'.repeat(200)];
      for (const name of names) await pairClient(service, ['responses'], name);
      const page = await browser.newPage();
      await page.setViewportSize({ width: 1280, height: 800 });
      await signIn(page, service, ['admin'], 'clients viewer');
      await page.goto(`${service.url}/#/clients`);
      await page.getByRole('cell', { name: names[1], exact: true }).waitFor();
      const region = page.getByRole('region', { name: 'Paired clients' });
      const width = await region.evaluate((element) => ({ scroll: element.scrollWidth, client: element.clientWidth }));
      await screenshot(page, 'clients-long-name');
      assert.ok(width.scroll <= width.client + 1, `the table fits its region: ${JSON.stringify(width)}`);
      for (const name of names) {
        const button = page.getByRole('button', { name: `Revoke ${name}`, exact: true });
        const inside = await button.evaluate((element) => {
          const box = element.getBoundingClientRect();
          const frame = element.closest('[role="region"]')!.getBoundingClientRect();
          return box.left >= frame.left && box.right <= frame.right + 1;
        });
        assert.ok(inside, 'the Revoke button is inside the table\'s region');
      }
      assert.deepEqual(await axeViolations(page), [], 'accessibility violations on the clients');
    })));

  test('a response with a long input and long instructions: scrollable regions a keyboard reaches, short ones not in the tab order', { timeout: 120_000 }, () =>
    withService({}, (service) => withBrowser(async (browser) => {
      const page = await browser.newPage();
      const client = await signIn(page, service, ['responses']);
      const created = (await client.createResponse({
        model: 'lmsp-tiny',
        instructions: LONG,
        input: [{ role: 'user', content: LONG }, { role: 'user', content: 'and a short one' }],
        max_output_tokens: 8,
        background: true,
      })).body;
      await page.goto(`${service.url}/#/tasks/${created.task.id}`);
      await page.locator('.facts .badge', { hasText: 'completed' }).or(page.locator('.facts .badge', { hasText: 'incomplete' })).waitFor({ timeout: 60_000 });
      await page.getByRole('region', { name: 'Input 1, user, scrollable' }).waitFor();
      await page.getByRole('region', { name: 'Instructions, scrollable' }).waitFor();

      const details = await boxes(page, 'section[aria-labelledby="response-details"] pre');
      assert.deepEqual(details.map(({ label, role, tabIndex }) => ({ label, role, tabIndex })), [
        { label: 'Instructions, scrollable', role: 'region', tabIndex: '0' },
        { label: 'Input 1, user, scrollable', role: 'region', tabIndex: '0' },
        { label: null, role: null, tabIndex: null },
      ]);
      assert.deepEqual(details.map((box) => box.overflows), [true, true, false], 'only the long boxes scroll');
      // The output of 8 tokens fits its box and is not a tab stop.
      assert.equal((await boxes(page, '[data-testid="output"]'))[0]!.tabIndex, null);
      assert.deepEqual(await axeViolations(page), [], 'accessibility violations on the task page');
      await scrollByKeyboard(page, 'Input 1, user, scrollable');
      await screenshot(page, 'task-long-input');
      await fitsPhone(page, 'the task page', 'task-long-input-390');
    })));

  test('a stored chat completion with a long message', { timeout: 120_000 }, () =>
    withService({}, (service) => withBrowser(async (browser) => {
      const response = await api(service, '/v1/chat/completions', {
        method: 'POST',
        json: { model: 'lmsp-tiny', messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: LONG }], max_completion_tokens: 4, store: true },
      });
      assert.equal(response.status, 200);
      const completion = (await response.json()) as ChatCompletionObject;
      const page = await browser.newPage();
      await signIn(page, service, ['admin'], 'chat viewer');
      await page.goto(`${service.url}/#/chat/${completion.id}`);
      await page.getByRole('region', { name: 'Message 2, user, scrollable' }).waitFor();
      const messages = await boxes(page, 'ol.messages pre');
      assert.deepEqual(messages.map(({ label, tabIndex }) => ({ label, tabIndex })), [
        { label: null, tabIndex: null },
        { label: 'Message 2, user, scrollable', tabIndex: '0' },
      ]);
      assert.deepEqual(await axeViolations(page), [], 'accessibility violations on the completion');
      await scrollByKeyboard(page, 'Message 2, user, scrollable');
      await fitsPhone(page, 'the chat completion', 'chat-long-message-390');
    })));

  test('a model id of 128 characters wraps in the Models table: its status and the other columns stay in sight', { timeout: 120_000 }, () =>
    withService({}, (service) => withBrowser(async (browser) => {
      const id = `long-model-id-${'x'.repeat(114)}`;
      copyFileSync(join(service.dataDir, 'models', 'lmsp-tiny.gguf'), join(service.dataDir, 'models', 'long.gguf'));
      assert.equal((await api(service, '/v1/models', { method: 'POST', json: { path: 'long.gguf', id } })).status, 201);
      const page = await browser.newPage();
      await page.setViewportSize({ width: 1280, height: 800 });
      await signIn(page, service, ['models:read', 'models:write'], 'models viewer');
      await page.goto(`${service.url}/#/models`);
      await page.getByRole('cell', { name: id }).waitFor();
      const region = page.getByRole('region', { name: 'Registered models' });
      const width = await region.evaluate((element) => ({ scroll: element.scrollWidth, client: element.clientWidth }));
      await screenshot(page, 'models-long-id');
      assert.ok(width.scroll <= width.client + 1, `the table fits its region: ${JSON.stringify(width)}`);
      assert.deepEqual(await axeViolations(page), [], 'accessibility violations on the models');

      // On a phone the table scrolls sideways inside its region; ids and paths keep a readable
      // width rather than breaking a few letters a line.
      await page.setViewportSize({ width: 390, height: 844 });
      const narrow = await page.locator('.model-id').first().evaluate((element) => element.getBoundingClientRect().width);
      assert.ok(narrow >= 120, `the model id is ${narrow} px wide at 390 px`);
      const path = await page.locator('td .path').first().evaluate((element) => element.getBoundingClientRect().width);
      assert.ok(path >= 120, `the path is ${path} px wide at 390 px`);
      await fitsPhone(page, 'the models', 'models-390');
    })));
});
