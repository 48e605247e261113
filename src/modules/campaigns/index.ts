/** The campaigns module's public surface: the only file other modules import. */
export { campaignRoutes } from './campaigns.routes';
export { cancelCampaignDelivery, completeCampaign, startCampaignSend } from './campaigns.service';
export type { CampaignRow } from './campaigns.service';
