/** The topics module's public surface: the only file other modules import. */
export { ContactTopic, ContactTopicSchema, Topic, TopicSchema, TOPIC_STATES } from './topics.entity';
export type { TopicDefault, TopicState } from './topics.entity';
export { doubleOptInApplies, getTopic, joinTopics, missingTopics, setContactTopics, topicStateOf, topicStatesOf, unknownTopics } from './topics.service';
export type { TopicChangeOptions } from './topics.service';
export { receivesTopicWhere } from './topics.queries';
export { topicRoutes } from './topics.routes';
