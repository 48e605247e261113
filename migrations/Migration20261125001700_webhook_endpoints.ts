import { Migration } from '@mikro-orm/migrations';

/**
 * Webhooks out: a project's endpoints, and one delivery row per event and subscribed endpoint,
 * written by a trigger in the event's own transaction (so no event is lost or delivered for a
 * rolled-back write) with its body frozen then: every retry sends the same bytes under the same id.
 */
export class Migration20261125001700_webhook_endpoints extends Migration {
  override async up(): Promise<void> {
    this.addSql(`CREATE TABLE webhook_endpoints (
      id uuid PRIMARY KEY,
      project_id uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
      url text NOT NULL,
      events text[],
      description text,
      enabled boolean NOT NULL DEFAULT true,
      secret text NOT NULL,
      previous_secret text,
      previous_secret_expires_at timestamptz,
      failing_since timestamptz,
      disabled_reason text,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`);
    this.addSql(`CREATE INDEX webhook_endpoints_project_idx ON webhook_endpoints (project_id, created_at)`);
    this.addSql(`CREATE TABLE webhook_deliveries (
      id uuid PRIMARY KEY,
      endpoint_id uuid NOT NULL REFERENCES webhook_endpoints(id) ON DELETE CASCADE,
      project_id uuid NOT NULL,
      event_id uuid,
      event_type text NOT NULL,
      body text NOT NULL,
      status text NOT NULL DEFAULT 'PENDING',
      attempts integer NOT NULL DEFAULT 0,
      last_status_code integer,
      last_error text,
      next_attempt_at timestamptz NOT NULL DEFAULT now(),
      claimed_until timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      delivered_at timestamptz
    )`);
    this.addSql(`CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at) WHERE status = 'PENDING'`);
    this.addSql(`CREATE INDEX webhook_deliveries_endpoint_idx ON webhook_deliveries (endpoint_id, created_at DESC, id DESC)`);
    // `email.*` subscribes to every event whose name starts with `email.`; no list means every event.
    this.addSql(`CREATE FUNCTION route_events_to_webhooks() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        INSERT INTO webhook_deliveries (id, endpoint_id, project_id, event_id, event_type, body, created_at)
          SELECT gen_random_uuid(), w.id, e.project_id, e.id, e.name,
            jsonb_build_object(
              'type', e.name,
              'timestamp', to_char(e.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
              'data', e.data || jsonb_build_object('contact', jsonb_build_object('id', c.id, 'email', c.email))
            )::text,
            e.created_at
          FROM inserted e
          JOIN webhook_endpoints w ON w.project_id = e.project_id AND w.enabled
            AND (w.events IS NULL OR e.name = ANY (w.events)
                 OR EXISTS (SELECT 1 FROM unnest(w.events) p WHERE right(p, 2) = '.*' AND starts_with(e.name, left(p, -1))))
          LEFT JOIN contacts c ON c.id = e.contact_id;
        IF FOUND THEN PERFORM pg_notify('postbox_webhook_deliveries', ''); END IF;
        RETURN NULL;
      END $$`);
    this.addSql(`CREATE TRIGGER events_route_to_webhooks AFTER INSERT ON events REFERENCING NEW TABLE AS inserted
      FOR EACH STATEMENT EXECUTE FUNCTION route_events_to_webhooks()`);
  }
}
