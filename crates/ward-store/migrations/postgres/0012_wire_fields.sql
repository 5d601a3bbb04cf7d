-- Fields of the public wire contract Ward now keeps instead of refusing or
-- dropping: an organization's kind (set when the root is created, inherited
-- by its groups) and a tag's deprecation flag and bundle labels.
ALTER TABLE groups ADD COLUMN kind INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tags ADD COLUMN deprecated INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tags ADD COLUMN bundles TEXT NOT NULL DEFAULT '[]';
