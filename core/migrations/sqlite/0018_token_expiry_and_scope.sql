-- Users and tokens, managed (issue 10), SQLite: API tokens get an optional expiry and a scope.
-- `expires_at_ms` is epoch ms, NULL = never; `scope` is `role` (the user's current role) or
-- `read_only` (no permission whatsoever). Existing tokens keep acting with their user's role.

ALTER TABLE api_tokens ADD COLUMN expires_at_ms INTEGER;
ALTER TABLE api_tokens ADD COLUMN scope TEXT NOT NULL DEFAULT 'role';
