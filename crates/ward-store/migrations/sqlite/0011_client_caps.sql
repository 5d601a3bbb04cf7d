-- Per-client caps. Upload sessions record who opened them, so each identity
-- and each repo holds a bounded number at once (sessions from before have no
-- creator and count only against their repo). Headless logins record the
-- client address that started them, so one client cannot take every pending
-- login of a provider.
ALTER TABLE uploads ADD COLUMN creator TEXT NOT NULL DEFAULT '';
CREATE INDEX uploads_creator ON uploads (creator);
CREATE INDEX uploads_repo ON uploads (repo_uid);
ALTER TABLE device_logins ADD COLUMN client TEXT NOT NULL DEFAULT '';
CREATE INDEX device_logins_client ON device_logins (client);
