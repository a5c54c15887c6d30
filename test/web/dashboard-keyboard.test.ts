/**
 * The dashboard used as people use it (LMSP 15): the event log follows a running task, the keyboard
 * focus is never dropped on the page when the control that was used goes away, the revoke
 * confirmation passes the accessibility check, and older tasks are a page away.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { NO_BROWSER, screenshot, axeViolations, signIn, withBrowser } from '../helpers/browser.js';
import { pairClient, waitFor, withService } from '../helpers/service.js';

const focused = (page: Page) => page.evaluate("({ tag: document.activeElement?.tagName, text: document.activeElement?.textContent?.trim(), cls: document.activeElement?.className })") as Promise<{ tag: string; text: string; cls: string }>;

describe('the dashboard at the keyboard (LMSP 15)', { skip: NO_BROWSER ?? false }, () => {
  test('the event log follows a running task to its newest event; cancel from the keyboard leaves the focus on its notice', { timeout: 120_000 }, () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '30' } }, (service) => withBrowser(async (browser) => {
      const page = await browser.newPage();
      const client = await signIn(page, service, ['responses', 'models:read']);
      const created = (await client.createResponse({ model: 'lmsp-tiny', input: 'long', max_output_tokens: 2000, background: true })).body;
      await page.goto(`${service.url}/#/tasks/${created.task.id}`);
      const log = page.locator('.log');
      // Well past a screenful of rows, the newest row is still in sight.
      await waitFor(async () => (await log.locator('tbody tr').count()) > 80 || undefined, { timeoutMs: 60_000 });
      const geometry = await log.evaluate((element) => ({ top: element.scrollTop, height: element.clientHeight, full: element.scrollHeight }));
      assert.ok(geometry.full > geometry.height * 2, `the log overflows (${JSON.stringify(geometry)})`);
      assert.ok(geometry.top + geometry.height >= geometry.full - 80, `the log follows its newest event: ${JSON.stringify(geometry)}`);

      // A reader who scrolls back is left where they are.
      await log.evaluate((element) => {
        element.scrollTop = 0;
      });
      await page.waitForTimeout(1000);
      assert.ok(await log.evaluate((element) => element.scrollTop) < 50, 'scrolled back, the log stays put');

      await page.getByRole('button', { name: 'Cancel task' }).focus();
      await page.keyboard.press('Enter');
      await page.getByText('The task was cancelled.').waitFor();
      const after = await focused(page);
      assert.match(after.cls, /notice/, `the focus is on the notice, not dropped: ${JSON.stringify(after)}`);
    })));

  test('signing in from the keyboard leaves the focus on the first view\'s heading, not on the page', { timeout: 120_000 }, () =>
    withService({}, (service) => withBrowser(async (browser) => {
      const page = await browser.newPage();
      const code = await service.client.createPairingCode({ name: 'keyboard', scopes: ['responses'] });
      await page.goto(`${service.url}/`);
      await page.getByLabel('Pairing code').focus();
      await page.keyboard.type(code.code);
      await page.keyboard.press('Tab');
      await page.keyboard.type('keyboard');
      await page.keyboard.press('Enter');
      await page.getByRole('navigation', { name: 'Sections' }).waitFor();
      await waitFor(async () => (await focused(page)).tag === 'H1' || null, { what: 'the focus on the heading', timeoutMs: 5000 });
    })));

  test('revoking a client: the confirmation takes the focus, Escape backs out, and it passes the accessibility check', { timeout: 120_000 }, () =>
    withService({}, (service) => withBrowser(async (browser) => {
      const page = await browser.newPage();
      await signIn(page, service, ['admin'], 'keyboard admin');
      await pairClient(service, ['responses'], 'doomed');
      await page.goto(`${service.url}/#/clients`);
      const revoke = page.getByRole('button', { name: 'Revoke doomed' });
      await revoke.focus();
      await page.keyboard.press('Enter');
      await page.getByRole('button', { name: 'Revoke now: doomed' }).waitFor();
      assert.equal((await focused(page)).text, 'Keep', 'the safe choice takes the focus');
      assert.deepEqual(await axeViolations(page), [], 'no accessibility violation while confirming');
      await screenshot(page, 'clients-revoke-confirm');
      await page.keyboard.press('Escape');
      await revoke.waitFor();
      assert.equal((await focused(page)).text, 'Revoke', 'Escape gives the focus back to Revoke');
      await page.keyboard.press('Enter');
      await waitFor(async () => (await focused(page)).text === 'Keep' || undefined, { what: 'the focus on Keep' });
      await page.keyboard.press('Shift+Tab');
      assert.equal((await focused(page)).text, 'Revoke now');
      await page.keyboard.press('Enter');
      await waitFor(async () => (await focused(page)).text?.startsWith('revoked') || undefined, { timeoutMs: 10_000, what: 'the focus on the revoked row' });
    })));

  test('older tasks are a page away: Older and Newer follow the API cursor', { timeout: 120_000 }, () =>
    withService({}, (service) => withBrowser(async (browser) => {
      const page = await browser.newPage();
      const client = await signIn(page, service, ['responses']);
      const ids: string[] = [];
      for (let i = 0; i < 53; i++) ids.push((await client.createResponse({ model: 'lmsp-tiny', input: `t${i}`, max_output_tokens: 1, background: true })).body.task.id);
      await page.goto(`${service.url}/#/tasks`);
      const firstColumn = page.locator('tbody tr td:first-child');
      await waitFor(async () => (await firstColumn.count()) === 50 || undefined);
      assert.equal(await firstColumn.first().textContent(), ids[52]);
      await page.getByRole('button', { name: 'Older' }).click();
      await waitFor(async () => (await firstColumn.count()) === 3 || undefined);
      assert.deepEqual(await firstColumn.allTextContents(), [ids[2], ids[1], ids[0]]);
      assert.equal((await focused(page)).text, 'Older', 'the focus stays on the button');
      await page.getByRole('button', { name: 'Newer' }).click();
      await waitFor(async () => (await firstColumn.count()) === 50 || undefined);
      assert.equal(await firstColumn.first().textContent(), ids[52]);
    })));
});
