import { test, expect, Page } from '@playwright/test';
import { authFile, hydrated, waitForIngest } from './helpers';

// Acting on dead letters in the browser: pick, replay (the relay inside `redrive serve`
// publishes to each record's source topic, `payments`, on the test broker), watch the status
// change, find it in the audit trail, delete and restore, "replay all matching" through its
// confirmation page, the same as plain HTML forms without JavaScript, and a viewer who sees
// none of it. The tests build on each other (statuses, audit rows), so they run in order;
// every dead letter ends live (not deleted), as the browse tests expect.
test.describe.configure({ mode: 'serial' });

/** The list narrowed to the error group of the 3 Spring payment failures, reached as a user
 * does: from the error groups page. Returns the list URL. */
async function openPaymentGroup(page: Page): Promise<string> {
  await page.goto('/groups');
  const row = page.locator('tr', { hasText: 'IllegalStateException' }).first();
  await row.locator('a[href*="fingerprint="]').first().click();
  await expect(page).toHaveURL(/fingerprint=/);
  await expect(page.locator('tbody tr')).toHaveCount(3);
  return page.url();
}

/** The status badge of dead letter `id` in the list. */
function statusOf(page: Page, id: string) {
  return page.locator(`tbody tr[data-id="${id}"] .badge`).first();
}

/** Ids of the rows shown, top to bottom. */
async function rowIds(page: Page): Promise<string[]> {
  return page.locator('tbody tr[data-id]').evaluateAll((rows) =>
    rows.map((r) => r.getAttribute('data-id') ?? ''),
  );
}

/** Collects script errors (uncaught exceptions, console errors) of `page`. */
function scriptErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  return errors;
}

/** Waits for a job page to show the job finished with `published` of `total` published. */
async function expectJobFinished(page: Page, total: number) {
  await expect(page.locator('.job-total')).toHaveText(String(total));
  await expect(page.locator('.job-status')).toHaveText('finished', { timeout: 45_000 });
  await expect(page.locator('.job-published')).toHaveText(String(total));
  await expect(page.locator('.job-failed')).toHaveText('0');
}

test.describe('as an operator', () => {
  test.use({ storageState: authFile('operator') });

  test.beforeEach(async ({ page }) => {
    await waitForIngest(page);
  });

  test('pick two rows of an error group, replay them, watch them become replayed', async ({ page }) => {
    const errors = scriptErrors(page);
    const listUrl = await openPaymentGroup(page);
    await hydrated(page);
    const ids = await rowIds(page);
    const picked = ids.slice(0, 2);
    const selected = page.locator('.selected-count');
    await expect(selected).toHaveText('0 selected');
    await expect(page.getByRole('button', { name: 'Replay selected' })).toBeDisabled();
    for (const id of picked) {
      await page.locator(`tbody tr[data-id="${id}"] input[name="ids[]"]`).check();
    }
    await expect(selected).toHaveText('2 selected');
    // Select-all picks the whole page, and unpicks it again.
    const all = page.getByRole('checkbox', { name: 'Select every dead letter on this page' });
    await all.check();
    await expect(selected).toHaveText('3 selected');
    await all.uncheck();
    await expect(selected).toHaveText('0 selected');
    for (const id of picked) {
      await page.locator(`tbody tr[data-id="${id}"] input[name="ids[]"]`).check();
    }
    await expect(selected).toHaveText('2 selected');
    await page.locator('input[name="reason"]').fill('e2e: provider fixed, replay two');
    await page.getByRole('button', { name: 'Replay selected' }).click();

    // The job page follows the replay live (it polls while the job runs).
    await expect(page).toHaveURL(/\/jobs\/[0-9a-f-]{36}$/);
    await expect(page.locator('progress')).toBeVisible();
    await expectJobFinished(page, 2);
    await expect(page.locator('.job-facts')).toContainText('each record\'s source topic');
    await expect(page.locator('.job-facts')).toContainText('e2e: provider fixed, replay two');

    // Back on the list: the two replayed, the third untouched.
    await page.goto(listUrl);
    for (const id of picked) await expect(statusOf(page, id)).toHaveText('replayed');
    await expect(statusOf(page, ids[2])).toHaveText('new');

    // The detail page tells the story of one of them.
    await page.goto(`/dead-letters/${picked[0]}`);
    const history = page.locator('table.history');
    await expect(history).toContainText('ingested');
    await expect(history.locator('tr', { hasText: 'replay requested' })).toContainText('oncall');
    await expect(history.locator('tr', { hasText: 'published' })).toContainText(/payments.*partition.*offset/);
    // The facts list that counts replays (the Tier section has a facts list of its own).
    await expect(page.locator('dl.facts', { hasText: 'time(s)' })).toContainText('1 time(s)');
    expect(errors, 'no script errors').toEqual([]);
  });

  test('the audit page finds the replay, filtered in the URL, with a CSV link', async ({ page }) => {
    await page.goto('/audit');
    await page.locator('input[name="actor"]').fill('oncall');
    await page.locator('select[name="action"]').selectOption('replay');
    await page.getByRole('button', { name: 'Apply' }).click();
    await expect(page).toHaveURL(/actor=oncall/);
    await expect(page).toHaveURL(/action=replay/);
    const row = page.locator('table.audit tbody tr', { hasText: 'e2e: provider fixed, replay two' });
    await expect(row).toHaveCount(1);
    await expect(row).toContainText('oncall');
    await expect(row.locator('td.num')).toHaveText('2');
    await expect(row).toContainText('ok: 2 queued');
    await expect(row.locator('.agent')).not.toBeEmpty();
    const csv = page.getByRole('link', { name: 'CSV' });
    await expect(csv).toHaveAttribute('href', /^\/api\/v1\/audit\.csv\?.*actor=oncall.*action=replay|^\/api\/v1\/audit\.csv\?.*action=replay.*actor=oncall/);
    const body = await (await page.request.get((await csv.getAttribute('href'))!)).text();
    expect(body.split('\n')[0]).toContain('actor');
    expect(body).toContain('e2e: provider fixed, replay two');
    // The row links to its job.
    await row.locator('a[href^="/jobs/"]').click();
    await expect(page).toHaveURL(/\/jobs\//);
    await expect(page.locator('.job-total')).toHaveText('2');
  });

  test('delete one without a reload, find it under "deleted", restore it', async ({ page }) => {
    const errors = scriptErrors(page);
    await page.addInitScript(() => { (window as any).__pwned = 0; });
    const listUrl = await openPaymentGroup(page);
    await hydrated(page);
    // A marker that a full page load would wipe out.
    await page.evaluate(() => { (window as any).__sameDocument = true; });
    const [victim] = await rowIds(page);
    await page.locator(`tbody tr[data-id="${victim}"] input[name="ids[]"]`).check();
    // The reason is stored text like any other: shown, never run.
    await page.locator('input[name="reason"]').fill('e2e: duplicate <img src=x onerror="window.__pwned=1">');
    await page.getByRole('button', { name: 'Delete selected' }).click();
    await expect(page.locator('.done-box')).toContainText('Deleted 1 dead letter.');
    await expect(page.locator(`tbody tr[data-id="${victim}"]`)).toHaveCount(0);
    await expect(page.locator('tbody tr')).toHaveCount(2);
    expect(await page.evaluate(() => (window as any).__sameDocument)).toBe(true);

    await page.locator('select[name="status"]').selectOption('deleted');
    await page.locator('form.filter-bar button[type="submit"]').click();
    await expect(page).toHaveURL(/status=deleted/);
    await expect(page.locator('tbody tr')).toHaveCount(1);
    await expect(statusOf(page, victim)).toHaveText('deleted');
    await expect(page.getByRole('button', { name: 'Delete selected' })).toHaveCount(0);
    await hydrated(page);
    await page.locator(`tbody tr[data-id="${victim}"] input[name="ids[]"]`).check();
    await page.getByRole('button', { name: 'Restore selected' }).click();
    await expect(page.locator('.done-box')).toContainText('Restored 1 dead letter');
    await expect(page.locator('tbody tr[data-id]')).toHaveCount(0);

    await page.goto(listUrl);
    await expect(page.locator('tbody tr')).toHaveCount(3);
    await page.goto(`/dead-letters/${victim}`);
    const history = page.locator('table.history');
    await expect(history.locator('tr', { hasText: 'deleted' })).toContainText('e2e: duplicate');
    await expect(history.locator('tr', { hasText: 'restored' })).toContainText('oncall');
    await page.goto('/audit?action=delete');
    await expect(page.locator('table.audit')).toContainText('onerror="window.__pwned=1"');
    expect(await page.locator('img[src="x"]').count()).toBe(0);
    expect(await page.evaluate(() => (window as any).__pwned)).toBe(0);
    expect(errors, 'no script errors').toEqual([]);
  });

  test('"replay all matching" shows the exact count first, and acts only on Confirm', async ({ page }) => {
    const errors = scriptErrors(page);
    await openPaymentGroup(page);
    const jobsBefore = (await (await page.request.get('/api/v1/replays')).json()).items.length;
    await page.getByRole('link', { name: 'Replay all matching this filter…' }).click();
    await expect(page).toHaveURL(/\/confirm\?op=replay&fingerprint=/);
    await expect(page.locator('.confirm-count .count')).toHaveText('3');
    await expect(page.locator('table.per-target tr', { hasText: 'payments' })).toContainText('3');
    await expect(page.locator('.filter-summary')).toContainText('fingerprint');
    // Nothing has happened yet.
    const jobsNow = (await (await page.request.get('/api/v1/replays')).json()).items.length;
    expect(jobsNow).toBe(jobsBefore);

    // Throttled to 1 msg/s, the job runs for a couple of seconds: long enough to watch.
    await page.locator('input[name="rate_per_sec"]').fill('1');
    await page.locator('form.confirm-form input[name="reason"]').fill('e2e: replay the group');
    await page.getByRole('button', { name: 'Confirm: replay 3 dead letters' }).click();
    await expect(page).toHaveURL(/\/jobs\/[0-9a-f-]{36}$/);
    await hydrated(page);
    await page.evaluate(() => { (window as any).__sameDocument = true; });
    await expect(page.locator('.job-status')).toHaveText('running');
    await expect(page.getByRole('button', { name: 'Cancel the replay' })).toBeVisible();
    // The page polls: the bar fills and the job finishes without a reload.
    await expectJobFinished(page, 3);
    expect(await page.evaluate(() => (window as any).__sameDocument)).toBe(true);
    await expect(page.locator('progress').first()).toHaveAttribute('value', '3');
    await expect(page.getByRole('button', { name: 'Cancel the replay' })).toHaveCount(0);
    await expect(page.locator('.job-facts')).toContainText('1 msgs/s');

    await page.goto('/jobs');
    const newest = page.locator('table.jobs tbody tr').first();
    await expect(newest).toContainText('oncall');
    await expect(newest).toContainText('finished');
    expect(errors, 'no script errors while the job page polls').toEqual([]);
  });

  test('the confirmation page says which dead letters cannot go to "source"', async ({ page }) => {
    // The record with no headers at all has no source topic.
    await page.goto('/confirm?op=replay&q=&status=new');
    await expect(page.locator('.no-target')).toContainText('no source topic');
    await expect(page.locator('.no-target')).toContainText('cannot be replayed to “source”');
    // A target topic makes them replayable there: counted again, still nothing done.
    await page.locator('form.inline-form input[name="target_topic"]').fill('e2e-elsewhere');
    await page.getByRole('button', { name: 'Count again' }).click();
    await expect(page).toHaveURL(/target_topic=e2e-elsewhere/);
    await expect(page.locator('.no-target')).toHaveCount(0);
    await expect(page.locator('table.per-target')).toContainText('e2e-elsewhere');
  });
});

test.describe('without JavaScript', () => {
  test.use({ storageState: authFile('operator'), javaScriptEnabled: false });

  test('plain forms delete, restore and replay; the job page refreshes itself', async ({ page }) => {
    await page.goto('/?source_topic=inventory');
    await expect(page.locator('tbody tr')).toHaveCount(1);
    const [id] = await rowIds(page);
    await page.locator('input[name="ids[]"]').check();
    await page.getByRole('button', { name: 'Delete selected' }).click();
    await expect(page).toHaveURL(/done=deleted-1/);
    await expect(page.locator('.done-box')).toContainText('Deleted 1 dead letter.');
    await expect(page.locator('tbody tr[data-id]')).toHaveCount(0);

    await page.goto('/?source_topic=inventory&status=deleted');
    await page.locator('input[name="ids[]"]').check();
    await page.getByRole('button', { name: 'Restore selected' }).click();
    await expect(page.locator('.done-box')).toContainText('Restored 1 dead letter');

    // Nothing picked: the server says so, on the same page.
    await page.goto('/?source_topic=inventory');
    await page.getByRole('button', { name: 'Replay selected' }).click();
    await expect(page.locator('.error-box')).toContainText('Nothing selected');

    // The detail page's own Replay button.
    await page.goto(`/dead-letters/${id}`);
    await page.getByRole('button', { name: 'Replay', exact: true }).click();
    await expect(page).toHaveURL(/\/jobs\//);
    await expect(page.locator('.job-total')).toHaveText('1');
    await expect(page.locator('.job-status')).toHaveText('finished', { timeout: 45_000 });

    // A throttled replay of three: no script runs here, so only the page's own refresh can
    // turn "running" into "finished".
    await page.goto('/?source_topic=payments');
    for (const box of await page.locator('input[name="ids[]"]').all()) await box.check();
    await page.locator('input[name="rate_per_sec"]').fill('1');
    await page.getByRole('button', { name: 'Replay selected' }).click();
    await expect(page).toHaveURL(/\/jobs\//);
    await expect(page.locator('.job-total')).toHaveText('3');
    await expect(page.locator('.job-status')).toHaveText('running');
    await expect(page.locator('.job-status')).toHaveText('finished', { timeout: 45_000 });
    await expect(page.locator('.job-published')).toHaveText('3');
  });
});

test.describe('as a viewer', () => {
  test.use({ storageState: authFile('viewer') });

  test('sees no action controls, and the server refuses a forged action', async ({ page }) => {
    await page.goto('/?source_topic=payments');
    await expect(page.locator('tbody tr')).toHaveCount(3);
    await expect(page.locator('input[name="ids[]"]')).toHaveCount(0);
    await expect(page.getByRole('button', { name: /selected/ })).toHaveCount(0);
    await expect(page.getByRole('link', { name: /all matching/ })).toHaveCount(0);
    const [id] = await rowIds(page);

    await page.goto(`/dead-letters/${id}`);
    await expect(page.locator('table.history')).toContainText('ingested');
    await expect(page.getByRole('button', { name: /^(Replay|Delete|Restore)$/ })).toHaveCount(0);

    await page.goto('/confirm?op=delete&source_topic=payments');
    await expect(page.locator('.confirm-count .count')).toHaveText('3');
    await expect(page.getByRole('button', { name: /Confirm/ })).toHaveCount(0);
    await expect(page.getByText('Your role may not delete dead letters')).toBeVisible();

    await page.goto('/jobs');
    await page.locator('table.jobs tbody tr a[href^="/jobs/"]').first().click();
    await expect(page.locator('.job-total')).not.toBeEmpty();
    await expect(page.getByRole('button', { name: /Cancel/ })).toHaveCount(0);

    // The session's CSRF token is on every page (the sign-out form): the role still refuses.
    const csrf = await page.locator('form.sign-out input[name="csrf"]').getAttribute('value');
    const res = await page.request.post('/api/ui/act', {
      form: { csrf: csrf!, op: 'delete', 'ids[]': id },
      headers: { Accept: 'application/json' },
    });
    expect(res.status()).toBe(403);
    await page.goto('/?source_topic=payments');
    await expect(page.locator('tbody tr')).toHaveCount(3);
    await page.goto('/audit?actor=watcher&action=delete');
    await expect(page.locator('table.audit tbody tr').first()).toContainText('denied');
  });
});
