import { test, expect } from '@playwright/test';
import { authFile, hydrated } from './helpers';

// Editing the automation rules in the browser (docs/automation.md, "Editing rules"): serve.sh
// installs version 1 from `[automation]` of redrive.toml; an admin opens the editor, sees a
// bad rule set refused with its message while the typed text stays, dry-runs a good one, saves
// it as version 2, and finds it in the versions list with its diff against version 1.
test.describe.configure({ mode: 'serial' });

test.describe('as an admin', () => {
  test.use({ storageState: authFile('admin') });

  test('edit the rules: refused, dry-run, saved as version 2 with its diff', async ({ page }) => {
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(String(e)));

    await page.goto('/automation');
    await hydrated(page);
    await expect(page.locator('[data-active-version="1"]')).toContainText('(config)');
    await expect(page.locator('tr[data-rule="e2e-timeouts"]')).toContainText('transient');
    // Its state: none yet, or the scheduler's first check (nothing is due for this rule).
    await expect(page.locator('tr[data-rule="e2e-timeouts"]')).toContainText(/no round yet|Last round .*nothing due/i);
    await page.getByRole('link', { name: 'Edit the rules' }).click();
    await expect(page).toHaveURL(/\/automation\/edit$/);
    await hydrated(page);

    const editor = page.locator('textarea[name="source"]');
    const original = await editor.inputValue();
    expect(original).toContain('name = "e2e-timeouts"');

    // A schedule on a manual rule: refused with the rule set's message, the text kept.
    const bad =
      original.trimEnd() +
      '\n\n[[rule]]\nname = "e2e-bad"\ntier = "manual"\nschedule = { every = "1m" }\n';
    await editor.fill(bad);
    await page.getByRole('button', { name: 'Save as version 2' }).click();
    await expect(page.locator('[data-rule-error]')).toContainText('only a transient rule');
    await expect(page.locator('[data-rule-error]')).toContainText('e2e-bad');
    await expect(editor).toHaveValue(bad);

    // A good one: its dry run over the stored dead letters, then saved with a reason.
    const good =
      original.trimEnd() +
      '\n\n[[rule]]\nname = "e2e-invalid"\ntier = "manual"\nmatch.error_messages = ["invalid"]\n';
    await editor.fill(good);
    await page.getByRole('button', { name: 'Dry run' }).click();
    const run = page.locator('#dry-run');
    await expect(run).toContainText('live dead letters');
    await expect(run.locator('tr[data-rule="e2e-invalid"]')).toHaveCount(1);
    await expect(page.locator('[data-rule-error]')).toHaveCount(0);
    await expect(editor).toHaveValue(good);
    await page.locator('input[name="reason"]').fill('e2e: business errors to manual');
    await page.getByRole('button', { name: 'Save as version 2' }).click();
    await expect(page).toHaveURL(/\/automation\/versions\/2\?done=saved$/);
    await expect(page.locator('.done-box')).toContainText('saved as a new version');
    await expect(page.locator('pre.diff')).toContainText('+ name = "e2e-invalid"');

    // The versions list: 2 (active, by admin, with the reason) above 1 (by (config)).
    await page.goto('/automation/versions');
    await hydrated(page);
    const two = page.locator('tr[data-version="2"]');
    await expect(two).toContainText('(active)');
    await expect(two).toContainText('admin');
    await expect(two).toContainText('e2e: business errors to manual');
    await expect(page.locator('tr[data-version="1"]')).toContainText('(config)');
    await two.getByRole('link', { name: '2', exact: true }).click();
    await expect(page).toHaveURL(/\/automation\/versions\/2$/);
    const diff = page.locator('pre.diff');
    await expect(diff).toContainText('+ match.error_messages = ["invalid"]');
    await expect(diff).toContainText('  name = "e2e-timeouts"');
    await expect(diff.locator('.diff-removed')).toHaveCount(0);
    expect(errors).toEqual([]);
  });
});
