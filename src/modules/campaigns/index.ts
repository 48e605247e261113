/** The campaigns module's public surface: the only file other modules import. */
export { Campaign, CampaignSchema } from './campaigns.entity';
export { CampaignStops } from './campaign-stops';
export { cancelCampaignDelivery, completeCampaign, decideAbWinner, holdAbTest, startCampaignSend } from './campaigns.service';
export { campaignRoutes } from './campaigns.routes';
