/**
 * LMSP 15 and 2 (hostile pages and neighbours): everything another client chose (its name, a
 * response's instructions, input and metadata, a stored chat completion's messages and
 * metadata) is shown by the dashboard as text, never as markup. An injected element or handler
 * would also break the page's Content-Security-Policy, which `withBrowser` reports as a failure.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { NO_BROWSER, signIn, withBrowser } from '../helpers/browser.js';
import { api, pairClient, waitFor, withService } from '../helpers/service.js';

const PAYLOAD = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>';

async function assertNothingInjected(page: Page, where: string): Promise<void> {
  assert.equal(await page.evaluate('window.__xss'), undefined, `no payload ran on ${where}`);
  assert.equal(await page.locator('img[src="x"], main script').count(), 0, `no payload element on ${where}`);
}

describe('the dashboard shows what clients chose as text (LMSP 15)', { skip: NO_BROWSER ?? false }, () => {
  test('a hostile client name, instructions, input and metadata are text on every view that shows them', () =>
    withService({}, (service) => withBrowser(async (browser) => {
      const hostile = await pairClient(service, ['responses', 'models:read'], `evil ${PAYLOAD}`);
      const created = await api({ url: service.url, token: hostile.token }, '/v1/responses', {
        method: 'POST',
        json: { model: 'lmsp-tiny', input: `input ${PAYLOAD}`, instructions: `instructions ${PAYLOAD}`, metadata: { note: PAYLOAD, [PAYLOAD.slice(0, 40)]: 'key' }, max_output_tokens: 4 },
      });
      assert.equal(created.status, 200, await created.clone().text());
      const response = (await created.json()) as { id: string };
      const chat = await api({ url: service.url, token: hostile.token }, '/v1/chat/completions', {
        method: 'POST',
        json: { model: 'lmsp-tiny', store: true, metadata: { note: PAYLOAD }, messages: [{ role: 'user', content: `chat ${PAYLOAD}` }], max_tokens: 4 },
      });
      assert.equal(chat.status, 200, await chat.clone().text());

      const page = await browser.newPage();
      await signIn(page, service, ['admin']);
      await page.goto(`${service.url}/#/clients`);
      await page.getByRole('cell', { name: `evil ${PAYLOAD}` }).first().waitFor();
      await assertNothingInjected(page, 'clients');

      await page.goto(`${service.url}/#/tasks`);
      await page.locator('tbody tr').first().waitFor();
      await assertNothingInjected(page, 'tasks');

      const tasks = (await (await api(service, '/v1/tasks?limit=10')).json()) as { data: Array<{ id: string; response_id: string | null }> };
      const task = tasks.data.find((entry) => entry.response_id === response.id)!;
      await page.goto(`${service.url}/#/tasks/${task.id}`);
      await page.getByText(`instructions ${PAYLOAD}`).first().waitFor();
      // The response's metadata, keys and values, as text.
      const metadata = page.locator('dl.metadata');
      assert.equal(await metadata.locator('xpath=.//dt[normalize-space()="note"]/following-sibling::dd').textContent(), PAYLOAD);
      assert.equal(await metadata.locator('dd', { hasText: 'key' }).locator('xpath=preceding-sibling::dt').textContent(), PAYLOAD.slice(0, 40));
      await assertNothingInjected(page, 'a task');

      await page.goto(`${service.url}/#/responses`);
      await page.locator('tbody tr').first().waitFor();
      await assertNothingInjected(page, 'responses');

      await page.goto(`${service.url}/#/chat`);
      await page.locator('tbody tr a').first().click();
      await waitFor(async () => ((await page.content()).includes('chat &lt;img') ? true : null), { timeoutMs: 10_000, what: 'the completion\'s messages, as text' });
      await assertNothingInjected(page, 'a chat completion');
    })));
});
