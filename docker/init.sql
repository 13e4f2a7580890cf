-- The outbox tutorial's schema: an order service's tables and its outbox, in schema inventory.
CREATE SCHEMA inventory;
CREATE TABLE inventory.purchaseorder (
    id bigserial PRIMARY KEY,
    customer text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE inventory.outboxevent (
    id uuid PRIMARY KEY,
    aggregatetype varchar(255) NOT NULL,
    aggregateid varchar(255) NOT NULL,
    type varchar(255) NOT NULL,
    timestamp timestamp NOT NULL DEFAULT now(),
    payload jsonb
);
