import { test, expect, Page } from '@playwright/test';
import { authFile, hydrated, waitForIngest } from './helpers';

// "… all matching" with no filter at all acts on every dead letter that is not deleted, so the
// confirmation page asks for the count to be typed (docs/replay.md, "Acting on everything").
// With JavaScript and without: the warning and the field are there, a wrong number is refused
// on the page and changes nothing. (The right number acting is tested in
// server/tests/it/confirm_all.rs: here it would change every fixture the other specs use.)

/** The count the page asks to type ("Type N to confirm"). */
async function askedCount(page: Page): Promise<number> {
  const prompt = await page.locator('.confirm-all label span').textContent();
  const m = /^Type (\d+) to confirm$/.exec(prompt ?? '');
  expect(m, `prompt: ${prompt}`).not.toBeNull();
  return Number(m![1]);
}

/** Dead letters not deleted, and delete audit rows, as the API tells them. */
async function state(page: Page): Promise<[number, number]> {
  const list = await (await page.request.get('/api/v1/dead-letters?limit=500')).json();
  const audit = await (await page.request.get('/api/v1/audit?action=delete&limit=1000')).json();
  return [list.items.length, audit.items.length];
}

async function refusesAWrongCount(page: Page, js: boolean) {
  await waitForIngest(page);
  const before = await state(page);
  await page.goto('/confirm?op=delete');
  if (js) await hydrated(page);
  await expect(page.locator('.confirm-all')).toContainText('This acts on everything.');
  const n = await askedCount(page);
  expect(n).toBe(before[0]);
  // A narrowed filter asks for nothing more.
  await page.goto('/confirm?op=delete&source_topic=payments');
  await expect(page.locator('.confirm-all')).toHaveCount(0);

  await page.goto('/confirm?op=delete');
  if (js) await hydrated(page);
  await page.locator('input[name="confirm_all"]').fill(String(n + 1));
  // With JavaScript the form calls the server function itself: a refusal is a 422 with its
  // message (app/src/refusal.rs), never a 500. Without, the browser follows the redirect back.
  const answer = js
    ? page.waitForResponse((r) => r.url().endsWith('/api/ui/act-on-filter'))
    : null;
  await page.getByRole('button', { name: /^Confirm: delete/ }).click();
  if (answer) expect((await answer).status()).toBe(422);
  await expect(page.locator('.error-box')).toContainText(
    `Nothing was changed: you typed ${n + 1}, but there are ${n} dead letters now.`,
  );
  expect(await state(page)).toEqual(before);
}

test.describe('with JavaScript', () => {
  test.use({ storageState: authFile('operator') });
  test('an empty filter needs the typed count; a wrong one is refused', async ({ page }) => {
    await refusesAWrongCount(page, true);
  });
});

test.describe('without JavaScript', () => {
  test.use({ storageState: authFile('operator'), javaScriptEnabled: false });
  test('an empty filter needs the typed count; a wrong one is refused', async ({ page }) => {
    await refusesAWrongCount(page, false);
  });
});
