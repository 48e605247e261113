import { Migration20261121000000_foundation } from './Migration20261121000000_foundation';
import { Migration20261121000100_sending } from './Migration20261121000100_sending';
import { Migration20261121000200_audiences } from './Migration20261121000200_audiences';
import { Migration20261121000300_automations } from './Migration20261121000300_automations';
import { Migration20261121000400_bulk_jobs } from './Migration20261121000400_bulk_jobs';
import { Migration20261121000500_contact_imports } from './Migration20261121000500_contact_imports';
import { Migration20261121000600_auth_tokens } from './Migration20261121000600_auth_tokens';
import { Migration20261121000700_project_invites } from './Migration20261121000700_project_invites';
import { Migration20261121000800_activity_counts } from './Migration20261121000800_activity_counts';
import { Migration20261121000900_security_and_billing } from './Migration20261121000900_security_and_billing';
import { Migration20261124001500_email_claim_owner } from './Migration20261124001500_email_claim_owner';
import { Migration20261125001600_contact_count_deltas } from './Migration20261125001600_contact_count_deltas';
import { Migration20261125001700_webhook_endpoints } from './Migration20261125001700_webhook_endpoints';
import { Migration20261125001800_tracking_controls } from './Migration20261125001800_tracking_controls';
import { Migration20261125001900_webhook_endpoint_due } from './Migration20261125001900_webhook_endpoint_due';
import { Migration20261125002000_idempotent_responses } from './Migration20261125002000_idempotent_responses';
import { Migration20261126002100_inbound_reports } from './Migration20261126002100_inbound_reports';
import { Migration20261126002200_campaign_chunk_index } from './Migration20261126002200_campaign_chunk_index';
import { Migration20261126194104_topics } from './Migration20261126194104_topics';
import { Migration20261126194932_finished_campaigns_forget_deleted_segments } from './Migration20261126194932_finished_campaigns_forget_deleted_segments';
import { Migration20261126195153_topic_targeting } from './Migration20261126195153_topic_targeting';
import { Migration20261126195504_consent } from './Migration20261126195504_consent';

/** Every migration in the order it runs; append new ones, never edit landed ones. */
export const migrationsList = [
  { name: 'Migration20261121000000_foundation', class: Migration20261121000000_foundation },
  { name: 'Migration20261121000100_sending', class: Migration20261121000100_sending },
  { name: 'Migration20261121000200_audiences', class: Migration20261121000200_audiences },
  { name: 'Migration20261121000300_automations', class: Migration20261121000300_automations },
  { name: 'Migration20261121000400_bulk_jobs', class: Migration20261121000400_bulk_jobs },
  { name: 'Migration20261121000500_contact_imports', class: Migration20261121000500_contact_imports },
  { name: 'Migration20261121000600_auth_tokens', class: Migration20261121000600_auth_tokens },
  { name: 'Migration20261121000700_project_invites', class: Migration20261121000700_project_invites },
  { name: 'Migration20261121000800_activity_counts', class: Migration20261121000800_activity_counts },
  { name: 'Migration20261121000900_security_and_billing', class: Migration20261121000900_security_and_billing },
  { name: 'Migration20261124001500_email_claim_owner', class: Migration20261124001500_email_claim_owner },
  { name: 'Migration20261125001600_contact_count_deltas', class: Migration20261125001600_contact_count_deltas },
  { name: 'Migration20261125001700_webhook_endpoints', class: Migration20261125001700_webhook_endpoints },
  { name: 'Migration20261125001800_tracking_controls', class: Migration20261125001800_tracking_controls },
  { name: 'Migration20261125001900_webhook_endpoint_due', class: Migration20261125001900_webhook_endpoint_due },
  { name: 'Migration20261125002000_idempotent_responses', class: Migration20261125002000_idempotent_responses },
  { name: 'Migration20261126002100_inbound_reports', class: Migration20261126002100_inbound_reports },
  { name: 'Migration20261126002200_campaign_chunk_index', class: Migration20261126002200_campaign_chunk_index },
  { name: 'Migration20261126194104_topics', class: Migration20261126194104_topics },
  { name: 'Migration20261126194932_finished_campaigns_forget_deleted_segments', class: Migration20261126194932_finished_campaigns_forget_deleted_segments },
  { name: 'Migration20261126195153_topic_targeting', class: Migration20261126195153_topic_targeting },
  { name: 'Migration20261126195504_consent', class: Migration20261126195504_consent },
];
