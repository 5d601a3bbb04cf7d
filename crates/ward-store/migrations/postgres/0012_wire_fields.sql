-- Fields of the public wire contract Ward now keeps instead of refusing or
-- dropping: an organization's kind (set when the root is created, inherited
-- by its groups), a tag's deprecation flag and bundle labels, and tags with
-- no digest yet (created by name through the API, before any push; NULL,
-- so the manifest key does not apply to them).
ALTER TABLE groups ADD COLUMN kind INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tags ALTER COLUMN digest DROP NOT NULL;
ALTER TABLE tags ADD COLUMN deprecated BOOLEAN NOT NULL DEFAULT FALSE;
-- JSON array of strings.
ALTER TABLE tags ADD COLUMN bundles TEXT NOT NULL DEFAULT '[]';
