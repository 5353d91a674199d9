import { test, expect } from '@playwright/test';
import { authFile, FIXTURES, waitForIngest } from './helpers';

// Reading needs no more than the viewer role.
test.use({ storageState: authFile('viewer') });

test.beforeEach(async ({ page }) => {
  await waitForIngest(page);
});

test('the overview shows the numbers and a rate chart, and a number links into the filtered list', async ({ page }) => {
  await page.goto('/overview?range=7d');
  await expect(page.getByRole('heading', { name: 'Overview' })).toBeVisible();
  const live = page.locator('.tile', { hasText: 'Live dead letters' });
  await expect(live).toContainText(String(FIXTURES));
  // The chart: server-rendered SVG, one bar (with its hover title) per hour with arrivals.
  const chart = page.locator('figure.chart svg');
  await expect(chart).toBeVisible();
  expect(await chart.locator('rect.bar').count()).toBeGreaterThan(0);
  await expect(chart.locator('rect.bar title').first()).toContainText('dead letters');
  await expect(page.locator('figure.chart figcaption')).toContainText(`${FIXTURES} dead letters`);

  // The DLQ topic's live count links to the list filtered to that topic.
  const row = page.locator('table.overview').first().locator('tbody tr').first();
  await row.locator('td a.num').first().click();
  await expect(page).toHaveURL(/\/\?dlq_topic=/);
  await expect(page.locator('tbody tr')).toHaveCount(FIXTURES);
  await expect(page.getByText(`${FIXTURES} dead letters match`)).toBeVisible();
});

test('the overview is the first link of the navigation', async ({ page }) => {
  await page.goto('/');
  await expect(page.locator('nav a').first()).toHaveText('Overview');
});
