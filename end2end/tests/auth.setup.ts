import { test as setup } from '@playwright/test';
import { authFile, signIn, USERS, Who } from './helpers';

// One sign-in per test user for the whole run; the tests reuse the sessions.
for (const who of Object.keys(USERS) as Who[]) {
  setup(`sign in as ${who}`, async ({ page }) => {
    await signIn(page, who);
    await page.context().storageState({ path: authFile(who) });
  });
}
