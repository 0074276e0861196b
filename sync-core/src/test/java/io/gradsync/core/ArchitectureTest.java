package io.gradsync.core;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.classes;
import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;
import static com.tngtech.archunit.library.dependencies.SlicesRuleDefinition.slices;

import com.tngtech.archunit.base.DescribedPredicate;
import com.tngtech.archunit.core.domain.JavaClass;
import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.domain.JavaCodeUnit;
import com.tngtech.archunit.core.domain.JavaField;
import com.tngtech.archunit.core.domain.JavaMember;
import com.tngtech.archunit.core.domain.JavaModifier;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import com.tngtech.archunit.lang.ArchCondition;
import com.tngtech.archunit.lang.ConditionEvents;
import com.tngtech.archunit.lang.SimpleConditionEvent;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * The fences of sync-core, checked on its compiled classes: the transport SPI stands alone (it knows
 * nothing of the rendezvous, the engine or the API above it), sync-core never reaches into a transport
 * module, the settings depend on nothing of gradsync, the packages form no cycle, and the engine's
 * internals appear in no public signature of the API, so they can change without breaking a user.
 */
class ArchitectureTest {
    private static final JavaClasses CORE = new ClassFileImporter()
            .withImportOption(ImportOption.Predefined.DO_NOT_INCLUDE_TESTS)
            .importPackages("io.gradsync.core");

    /** The engine's internals: how calls are numbered, described, sorted and pumped. */
    private static final Set<String> ENGINE_INTERNALS = Set.of(
            "io.gradsync.core.algorithm.Engine", "io.gradsync.core.algorithm.Inbox",
            "io.gradsync.core.algorithm.StreamLedger", "io.gradsync.core.transport.CallIds",
            "io.gradsync.core.algorithm.CollectiveDescriptor", "io.gradsync.core.ProgressThread");

    @Test
    void theTransportSpiDependsOnNothingAboveIt() {
        noClasses().that().resideInAPackage("io.gradsync.core.transport..")
                .should().dependOnClassesThat().resideInAnyPackage("io.gradsync.core.bootstrap..",
                        "io.gradsync.core.algorithm..", "io.gradsync.core.select..", "io.gradsync.core.launch..")
                .orShould().dependOnClassesThat().resideInAPackage("io.gradsync.core")
                .because("transports implement a small SPI and a job context, as Gloo's transports see a Store")
                .check(CORE);
    }

    @Test
    void settingsDependOnNothingElseOfGradsync() {
        noClasses().that().resideInAPackage("io.gradsync.core.settings..")
                .should().dependOnClassesThat().resideOutsideOfPackages("io.gradsync.core.settings..", "java..")
                .because("every package declares its settings with it, the transport SPI included")
                .check(CORE);
    }

    @Test
    void coreNeverReachesIntoATransportModule() {
        noClasses().that().resideInAPackage("io.gradsync.core..")
                .should().dependOnClassesThat().resideInAnyPackage("io.gradsync.aeron..", "io.gradsync.rdma..",
                        "io.aeron..", "org.agrona..", "com.ibm..")
                .because("modules depend inward: transports are found by name through ServiceLoader")
                .check(CORE);
    }

    @Test
    void packagesFormNoCycle() {
        slices().matching("io.gradsync.core.(*)..").should().beFreeOfCycles().check(CORE);
    }

    @Test
    void engineInternalsAppearInNoPublicSignature() {
        DescribedPredicate<JavaClass> internal = DescribedPredicate.describe("an engine internal",
                c -> ENGINE_INTERNALS.contains(c.getName()));
        classes().that().arePublic().and(DescribedPredicate.not(internal))
                .should(exposeNoneOf(internal))
                .check(CORE);
    }

    @Test
    void engineInternalsAreUsedOnlyByTheEngine() {
        noClasses().that().resideOutsideOfPackages("io.gradsync.core", "io.gradsync.core.algorithm")
                .should().dependOnClassesThat(DescribedPredicate.describe("an engine internal",
                        (JavaClass c) -> ENGINE_INTERNALS.contains(c.getName())))
                .check(CORE);
    }

    /** Public members of the class mention none of {@code internal} as a parameter, return or field type. */
    private static ArchCondition<JavaClass> exposeNoneOf(DescribedPredicate<JavaClass> internal) {
        return new ArchCondition<>("expose no engine internal in a public member") {
            @Override
            public void check(JavaClass owner, ConditionEvents events) {
                for (JavaMember member : owner.getMembers()) {
                    if (!member.getModifiers().contains(JavaModifier.PUBLIC)) {
                        continue;
                    }
                    List<JavaClass> types = new ArrayList<>();
                    if (member instanceof JavaField field) {
                        types.add(field.getRawType());
                    } else if (member instanceof JavaCodeUnit code) {
                        types.addAll(code.getRawParameterTypes());
                        types.add(code.getRawReturnType());
                    }
                    for (JavaClass type : types) {
                        if (internal.test(type)) {
                            events.add(SimpleConditionEvent.violated(owner, member.getFullName() + " exposes " + type.getName()));
                        }
                    }
                }
            }
        };
    }
}
