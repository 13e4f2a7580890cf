-- The outbox table with Debezium's default column names. Write one row per event in the same
-- transaction as the business change; pgoutbox publishes each INSERT once it commits.
-- Rows may be deleted afterwards (DELETEs are not published); never UPDATE them.
CREATE TABLE IF NOT EXISTS public.outbox (
    id            uuid         PRIMARY KEY,
    aggregatetype varchar(255) NOT NULL,
    aggregateid   varchar(255) NOT NULL,
    type          varchar(255) NOT NULL,
    payload       jsonb,
    created_at    timestamptz  NOT NULL DEFAULT now()
);

-- pgoutbox creates the publication itself with publication.autocreate.mode=filtered (before the slot);
-- to manage it yourself instead (publication.autocreate.mode=disabled):
--   CREATE PUBLICATION dbz_publication FOR TABLE public.outbox;
