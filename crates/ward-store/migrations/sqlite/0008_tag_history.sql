-- Ward schema v8 (SQLite): the digests each tag has pointed at (v1's
-- ListTagHistory). A row is written in the transaction that writes the tag,
-- when the tag is created or moved to another digest; a tag's update_time
-- grows with every move, so it keys the rows. The rows go with the tag.
-- Tags that exist already start from their current digest.

CREATE TABLE tag_history (
    tag_uid     TEXT NOT NULL REFERENCES tags (uid) ON DELETE CASCADE,
    update_time INTEGER NOT NULL,
    digest      TEXT NOT NULL,
    PRIMARY KEY (tag_uid, update_time)
) STRICT;

INSERT INTO tag_history (tag_uid, update_time, digest) SELECT uid, update_time, digest FROM tags;
