-- Each indexed package of a feed record keeps the record's `ranges` and
-- `versions` for it, so a report decides which records can apply to an
-- image without reading their bodies. NULL (records imported before this
-- column) means "read the body".
ALTER TABLE feed_record_packages ADD COLUMN affected TEXT;
