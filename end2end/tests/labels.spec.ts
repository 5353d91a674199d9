import { test, expect, Page } from '@playwright/test';
import { authFile, hydrated, waitForIngest } from './helpers';

// Triage in the browser: an operator adds a label on a dead letter's detail page, clicks the
// label to filter the list by it, edits an error group's note on the group's page and sees it
// on the groups page and on the dead letter; the same with plain forms (no JavaScript); a
// viewer reads labels and notes but gets no form. Every label added here is removed again.
test.describe.configure({ mode: 'serial' });

/** Collects script errors (uncaught exceptions, console errors) of `page`. */
function scriptErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  return errors;
}

/** Presses "Save note" and waits until the server has answered it. */
async function saveNote(page: Page) {
  const answered = page.waitForResponse(
    (r) => r.url().includes('/api/ui/note') && r.request().method() === 'POST',
  );
  await page.getByRole('button', { name: 'Save note' }).click();
  expect((await answered).status()).toBeLessThan(400);
}

/** The id of the newest dead letter of the error group whose row mentions `text`. */
async function openGroupRecord(page: Page, text: string): Promise<string> {
  await page.goto('/groups');
  const row = page.locator('tr', { hasText: text }).first();
  await row.locator('a[href*="fingerprint="]').first().click();
  await expect(page).toHaveURL(/fingerprint=/);
  const id = await page.locator('tbody tr[data-id]').first().getAttribute('data-id');
  expect(id).toBeTruthy();
  return id ?? '';
}

test.describe('as an operator', () => {
  test.use({ storageState: authFile('operator') });

  test.beforeEach(async ({ page }) => {
    await waitForIngest(page);
  });

  test('label a dead letter, filter the list by clicking it, edit a group note', async ({ page }) => {
    const errors = scriptErrors(page);
    const id = await openGroupRecord(page, 'IllegalStateException');
    await page.goto(`/dead-letters/${id}`);
    await hydrated(page);
    const triage = page.locator('section.triage-section');
    await triage.getByRole('textbox', { name: 'New label' }).fill('e2e: needs-fix');
    await triage.getByRole('button', { name: 'Add label' }).click();
    const chip = triage.locator('.label-chip', { hasText: 'e2e: needs-fix' });
    await expect(chip).toBeVisible();
    await expect(page.locator('table.history')).toContainText('label added');

    // Clicking the chip lists every dead letter with that label: this one only.
    await chip.click();
    await expect(page).toHaveURL(/[?&]label=e2e/);
    await expect(page.locator('tbody tr[data-id]')).toHaveCount(1);
    await expect(page.locator(`tbody tr[data-id="${id}"] .label-chip`)).toHaveText('e2e: needs-fix');
    await expect(page.locator('input[name="label"]').first()).toHaveValue('e2e: needs-fix');

    // The error group's note, edited in place on the group's page.
    await page.goto('/groups');
    const row = page.locator('tr', { hasText: 'IllegalStateException' }).first();
    await row.getByRole('link', { name: 'labels and note' }).click();
    await expect(page).toHaveURL(/\/groups\/[0-9a-f]{16}$/);
    await hydrated(page);
    const note = page.locator('.note-form textarea[name="note"]');
    await note.fill('e2e: the payment provider rejects <b>expired</b> cards');
    await saveNote(page);
    await expect(page.locator('.note-form')).toContainText('edited by oncall');
    await note.fill('e2e: provider outage, replay after 10:00');
    // The typed text is in the field at once: wait for the server's answer before reloading
    // (a reload would abort the request still in flight).
    await saveNote(page);
    await page.reload();
    await expect(note).toHaveValue('e2e: provider outage, replay after 10:00');

    // It shows on the groups page and on each dead letter of the group, as text.
    await page.goto('/groups');
    await expect(page.locator('tr', { hasText: 'IllegalStateException' }).first())
      .toContainText('e2e: provider outage');
    await page.goto(`/dead-letters/${id}`);
    await expect(page.locator('.group-triage')).toContainText('e2e: provider outage, replay after 10:00');

    // Clean up: remove the label (× on its chip) and the note.
    await hydrated(page);
    await page.getByRole('button', { name: 'Remove the label e2e: needs-fix' }).click();
    await expect(page.locator('section.triage-section .label-chip', { hasText: 'e2e: needs-fix' }))
      .toHaveCount(0);
    await page.goto('/groups');
    await page.locator('tr', { hasText: 'IllegalStateException' }).first()
      .getByRole('link', { name: 'labels and note' }).click();
    await hydrated(page);
    await page.locator('.note-form textarea[name="note"]').fill('');
    await saveNote(page);
    await expect(page.locator('.note-form')).not.toContainText('edited by');
    expect(errors, 'no script errors').toEqual([]);
  });
});

test.describe('without JavaScript', () => {
  test.use({ storageState: authFile('operator'), javaScriptEnabled: false });

  test('plain forms add and remove a label; a bad label is refused with a message', async ({ page }) => {
    await page.goto('/?source_topic=inventory');
    const id = await page.locator('tbody tr[data-id]').first().getAttribute('data-id');
    await page.goto(`/dead-letters/${id}`);
    await page.getByRole('textbox', { name: 'New label' }).fill('<b>bad</b>');
    await page.getByRole('button', { name: 'Add label' }).click();
    await expect(page.locator('.error-box')).toContainText('a label may hold');
    await page.goto(`/dead-letters/${id}`);
    await page.getByRole('textbox', { name: 'New label' }).fill('e2e-plain');
    await page.getByRole('button', { name: 'Add label' }).click();
    await expect(page).toHaveURL(new RegExp(`/dead-letters/${id}`));
    await expect(page.locator('section.triage-section .label-chip')).toHaveText(['e2e-plain']);
    await page.getByRole('button', { name: 'Remove the label e2e-plain' }).click();
    await expect(page.locator('section.triage-section .label-chip')).toHaveCount(0);
  });
});

test.describe('as a viewer', () => {
  test.use({ storageState: authFile('viewer') });

  test('reads labels and notes, gets no form', async ({ page }) => {
    await waitForIngest(page);
    const id = await openGroupRecord(page, 'IllegalStateException');
    await page.goto(`/dead-letters/${id}`);
    await expect(page.locator('section.triage-section')).toContainText('no labels');
    await expect(page.getByRole('button', { name: 'Add label' })).toHaveCount(0);
    await expect(page.getByRole('button', { name: 'Save note' })).toHaveCount(0);
  });
});
