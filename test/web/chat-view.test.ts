/**
 * The dashboard's view of stored chat completions (LMSP 13, 15) against the real endpoints: the
 * list newest first, a completion's messages and answer, and no accessibility violation.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { ChatCompletionObject } from '../../src/api/chat-completions.js';
import { NO_BROWSER, screenshot, axeViolations, signIn, withBrowser } from '../helpers/browser.js';
import { api, withService } from '../helpers/service.js';

describe('the dashboard shows stored chat completions (LMSP 13, 15)', { skip: NO_BROWSER ?? false }, () => {
  test('the list, newest first, and a completion with its messages and answer', { timeout: 120_000 }, () =>
    withService({}, (service) => withBrowser(async (browser) => {
      const ids: string[] = [];
      const answers: string[] = [];
      for (const question of ['first question', 'second question']) {
        const response = await api(service, '/v1/chat/completions', {
          method: 'POST',
          json: { model: 'lmsp-tiny', messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: question }], max_completion_tokens: 8, store: true },
        });
        const completion = (await response.json()) as ChatCompletionObject;
        ids.push(completion.id);
        answers.push(completion.choices[0]!.message.content!);
      }
      const page = await browser.newPage();
      await signIn(page, service, ['admin'], 'chat viewer');
      await page.goto(`${service.url}/#/chat`);
      await page.getByRole('heading', { level: 1, name: 'Chat completions' }).waitFor();
      await page.locator('tbody tr').nth(1).waitFor();
      const rows = await page.locator('tbody tr td:first-child').allTextContents();
      assert.deepEqual(rows, [ids[1], ids[0]], 'newest first');
      assert.deepEqual(await page.locator('tbody tr td:nth-child(3)').allTextContents(), ['length', 'length']);

      await page.getByRole('link', { name: ids[0]! }).click();
      await page.getByRole('heading', { level: 2, name: `Completion ${ids[0]}` }).waitFor();
      await page.locator('ol.messages li').nth(1).waitFor();
      const messages = await page.locator('ol.messages li pre').allTextContents();
      assert.deepEqual(messages, ['Be brief.', 'first question']);
      assert.equal(await page.locator('section.panel > pre.message').textContent(), answers[0]);
      await screenshot(page, 'view-chat-completion');
      assert.deepEqual(await axeViolations(page), []);
      assert.deepEqual(browser.problems, []);
    })));
});
