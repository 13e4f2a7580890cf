package local.apicurio;

import java.util.ArrayList;

import javax.enterprise.inject.Produces;
import javax.inject.Singleton;

import io.apicurio.common.apps.config.DynamicConfigPropertyList;

/**
 * Stands in for the Quarkus extension io.apicurio:apicurio-common-app-components-config-index(-deployment),
 * whose deployment jar the Maven mirror does not serve. That extension's only job is a synthetic bean
 * DynamicConfigPropertyList listing the app's @Dynamic config properties (used by the admin
 * "config properties" API that edits them at run time). Here the list is empty: every @Dynamic
 * property keeps working from static config (application.properties / -D / env), it just can't be
 * changed at run time through the admin API.
 */
public class DynamicConfigPropertyListProducer {
    @Produces
    @Singleton
    DynamicConfigPropertyList dynamicConfigPropertyList() {
        return new DynamicConfigPropertyList(new ArrayList<>());
    }
}
